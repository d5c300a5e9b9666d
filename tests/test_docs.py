"""The README and docs/ cannot drift from the code: options, command lines, links.

None of these tests trains: command lines are parsed and their settings validated, the
way the commands themselves do before anything starts.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from a3c.config import TrainConfig
from a3c.options import config_from_args, filled_options_tables, parsers

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
COMMANDS = ("a3c-train", "a3c-eval", "a3c-plot", "a3c-export")


def prose(markdown: str) -> str:
    """The Markdown without its fenced code blocks, whose `#` lines are shell comments."""
    return re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)


def page_id(path: Path) -> str:
    return str(path.relative_to(REPO))


# ------------------------------------------------------------------------------ options


OPTIONS = REPO / "docs" / "options.md"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_options_tables_are_the_commands_help(page: Path) -> None:
    text = page.read_text()
    assert filled_options_tables(text) == text, (
        f"{page_id(page)}'s options tables differ from --help: run python scripts/readme_options.py"
    )


def options_table(command: str) -> str:
    match = re.search(
        rf"<!-- options: {command} -->\n(.*?)<!-- end options -->", OPTIONS.read_text(), re.DOTALL
    )
    assert match, f"docs/options.md has no options table for {command}"
    return match[1]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_in_its_table(command: str) -> None:
    table = options_table(command)
    for action in parsers()[command]()._actions:
        if not action.option_strings or action.dest in ("help", "version"):
            continue
        flag = action.option_strings[0]
        assert f"`{flag}`" in table or f"`--[no-]{flag[2:]}`" in table, (
            f"{flag} is missing from docs/options.md's {command} table"
        )


def test_every_setting_has_a_flag() -> None:
    dests = {action.dest for action in parsers()["a3c-train"]()._actions}
    assert {f.name for f in dataclasses.fields(TrainConfig)} <= dests


def known_flags() -> set[str]:
    flags: set[str] = set()
    for build in parsers().values():
        for action in build()._actions:
            flags.update(action.option_strings)
    return flags


def test_every_flag_the_readme_names_exists() -> None:
    """Flags in prose and tables (`--flag` or `--[no-]flag`), not inside other tools' commands."""
    known = known_flags()
    named = re.findall(r"`(--(?:\[no-\])?[a-z][a-z0-9-]*)", README.read_text())
    assert named
    for flag in named:
        flag = flag.replace("[no-]", "")
        assert flag in known, f"the README names {flag}, which no a3c command has"


# ------------------------------------------------------------------------- command lines

SEPARATORS = {"&&", "||", ";", "|", ")", "&"}


SHELL_BLOCKS = ("", "bash", "sh", "shell", "console")


def shell_blocks(markdown: str) -> list[str]:
    """Lines of the fenced shell blocks (continuations joined); diagrams are ```text."""
    lines = []
    for info, block in re.findall(r"^```(\w*)\n(.*?)^```", markdown, re.DOTALL | re.MULTILINE):
        if info in SHELL_BLOCKS:
            lines.extend(block.replace("\\\n", " ").splitlines())
    return lines


def inline_code(markdown: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", prose(markdown))


def a3c_invocations(line: str) -> list[tuple[str, list[str]]]:
    """(command, arguments) of each a3c command in a shell line; a script's arguments after
    `--` are a3c-train's, as the scripts in scripts/ pass them on."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []
    found = []
    for index, token in enumerate(tokens):
        rest = []
        for arg in tokens[index + 1 :]:
            if arg in SEPARATORS:
                break
            rest.append(arg)
        if token.lstrip("(") in COMMANDS:
            found.append((token.lstrip("("), rest))
        elif re.fullmatch(r"scripts/\w+\.py", token) and "--" in rest:
            found.append(("a3c-train", rest[rest.index("--") + 1 :]))
    return found


def documented_invocations(source: Callable[[str], list[str]]) -> list[tuple[str, str, list[str]]]:
    found = []
    for page in PAGES:
        for line in source(page.read_text()):
            for command, args in a3c_invocations(line):
                found.append((page_id(page), command, args))
    return found


def test_the_readme_shows_every_command() -> None:
    shown = {
        command for page, command, _ in documented_invocations(shell_blocks) if page == "README.md"
    }
    assert shown == set(COMMANDS)


def invocation_id(value: object) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


@pytest.mark.parametrize(
    ("page", "command", "args"), documented_invocations(shell_blocks), ids=invocation_id
)
def test_command_lines_in_code_blocks_parse(
    page: str, command: str, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # preset paths in the docs are relative to the repository
    monkeypatch.syspath_prepend(str(REPO / "docs" / "examples"))  # PYTHONPATH=docs/examples
    parser = parsers()[command]()
    try:
        namespace = parser.parse_args(args)
    except SystemExit as exit:
        if exit.code == 0:  # --help, --version
            return
        pytest.fail(f"{page}: `{command} {shlex.join(args)}` is refused (exit {exit.code})")
    if command == "a3c-train" and getattr(namespace, "resume", None) is None:
        config_from_args(namespace)  # values in range, preset readable, env id known


@pytest.mark.parametrize(
    ("page", "command", "args"), documented_invocations(inline_code), ids=invocation_id
)
def test_flags_of_commands_in_prose_exist(page: str, command: str, args: list[str]) -> None:
    """Inline code may be a fragment (`a3c-eval --video`), so only its flags are checked."""
    known = {flag for action in parsers()[command]()._actions for flag in action.option_strings}
    for arg in args:
        flag = arg.split("=")[0]
        if flag.startswith("--") and flag != "--":
            assert flag in known, f"{page}: `{command} ... {arg}`: {command} has no {flag}"


def test_a_renamed_flag_is_caught() -> None:
    """The check above is not vacuous: a flag that does not exist fails to parse."""
    (_, args), *_ = a3c_invocations("a3c-train --env CartPole-v1 --rollout-steps 5")
    with pytest.raises(SystemExit):
        parsers()["a3c-train"]().parse_args(args)


# -------------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", prose(path.read_text()), re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_link_resolves(page: Path) -> None:
    text = page.read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    for target in targets:
        if re.match(r"[a-z]+://", target):
            continue  # no network here; external links are not checked
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        assert linked.exists(), f"{page_id(page)} links to {target}, which does not exist"
        if anchor:
            assert anchor in anchors(linked), f"{page_id(page)}: no heading for {target}"


def test_the_readme_links_every_report() -> None:
    readme = README.read_text()
    for page in PAGES[1:]:
        assert f"]({page_id(page)}" in readme, f"the README does not link {page_id(page)}"


@pytest.mark.parametrize("page", PAGES[1:], ids=page_id)
def test_every_report_starts_with_its_command(page: Path) -> None:
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# ")
    first = next(line for line in lines[1:] if line.strip())
    assert first.startswith("```"), f"{page_id(page)} does not start with its command"


# --------------------------------------------------------------------- nothing said twice


def tables(markdown: str) -> list[str]:
    return [m.strip() for m in re.findall(r"(?:^\|.*\n)+", markdown, re.MULTILINE)]


def test_no_table_or_section_appears_twice() -> None:
    seen: dict[str, str] = {}
    for page in PAGES:
        text = prose(page.read_text())
        for table in tables(text):
            assert table not in seen, f"a table of {page_id(page)} repeats one in {seen.get(table)}"
            seen[table] = page_id(page)
        headings = re.findall(r"^#+ .+$", text, re.MULTILINE)
        assert len(headings) == len(set(headings)), f"{page_id(page)} repeats a heading"


def test_the_readme_stays_short() -> None:
    assert len(README.read_text()) < 12_000, "README over 12,000 characters: move detail to docs/"
