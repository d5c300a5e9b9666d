"""The command-line parsers of `a3c-train`, `a3c-eval` and `a3c-plot`, and how `a3c-train`'s
flags, a preset and the defaults combine into one `TrainConfig`.

`a3c-train`'s flags are generated from `TrainConfig`'s fields, so a setting's name, type,
range and help are written once (a3c/config.py). docs/options.md's tables are rendered
from these parsers (`options_markdown`).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tomllib
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from a3c.config import TrainConfig, model_settings
from a3c.errors import UsageError
from a3c.fields import GROUPS, RUN, flag
from a3c.presets import find_preset, load_toml


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr and exit code 2, like every other bad input;
    `--version` on every command, with the versions a bug report needs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations: a flag shortened in a script would silently change meaning when
        # a new flag starts the same way.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--version",
            action=_PrintVersion,
            nargs=0,
            help="print the versions of a3c, torch, gymnasium, ale-py and Python, then exit",
        )

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def toml_literal(text: str) -> Any:
    """A command-line value read as a TOML literal (false, 3, 0.5, "a b", [1, 2]); a word
    that is none (rgb_array) is the string itself."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


class _KeyValues(argparse.Action):
    """KEY=VALUE ... into a dict, each value a TOML literal."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None
    ) -> None:
        pairs = {}
        for item in values:
            key, equals, text = item.partition("=")
            if not equals or not key.strip():
                parser.error(f"argument {option}: expected KEY=VALUE, got {item!r}")
            pairs[key.strip()] = toml_literal(text.strip())
        setattr(namespace, self.dest, {**getattr(namespace, self.dest, {}), **pairs})


class _PrintVersion(argparse.Action):
    """argparse's own version action wraps the line at the terminal's width."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_line(parser.prog))
        parser.exit()


def version_line(prog: str) -> str:
    """Read from the installed packages' metadata, so --version imports none of them."""
    from importlib import metadata

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    python = ".".join(map(str, sys.version_info[:3]))
    return (
        f"{prog} {installed('a3c')} (torch {installed('torch')}, gymnasium "
        f"{installed('gymnasium')}, ale-py {installed('ale-py')}, Python {python})"
    )


def format_default(value: Any) -> str:
    """A default as --help and the README show it: 1,000,000 steps, 1e-8, on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, float):
        return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m[1].replace('+', '')}{m[2]}", f"{value:g}")
    return str(value)


# Flags of a3c-train that say where settings come from or how to show the run, rather than
# being settings: they never reach TrainConfig.
COMMAND_FLAGS = ("config", "no_preset", "resume", "quiet")


def build_parser(prog: str = "a3c-train") -> argparse.ArgumentParser:
    """One flag per `TrainConfig` field, grouped by topic, plus the command's own flags.

    Unset flags stay out of the namespace, so a preset's value is only overridden by a
    flag that was given.
    """
    parser = OneLineParser(
        prog=prog,
        description="Train an A3C agent with Hogwild workers. "
        "Settings come from the dataclass defaults, then a preset (--config FILE, or the "
        "shipped preset for --env), then the flags given here. "
        "Budgets and intervals count agent steps summed over all workers.",
        argument_default=argparse.SUPPRESS,
    )
    groups = {name: parser.add_argument_group(name) for name in GROUPS}
    defaults = TrainConfig()
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        kind = next(
            t for t in (typing.get_args(hints[f.name]) or (hints[f.name],)) if t is not type(None)
        )
        default = f.metadata["default_text"] or getattr(defaults, f.name)
        help_text = f.metadata["help"]
        if default is not None:
            help_text += f" (default: {format_default(default)})"
        group = groups[f.metadata["group"]]
        origin = typing.get_origin(hints[f.name])
        if origin is dict:
            group.add_argument(
                flag(f.name), nargs="+", action=_KeyValues, metavar="KEY=VALUE", help=help_text
            )
        elif origin is list:
            # One flag per item, named in the singular: --wrapper A --wrapper B.
            group.add_argument(
                flag(f.name).removesuffix("s"), dest=f.name, action="append", metavar="SPEC",
                help=help_text,
            )  # fmt: skip
        elif kind is bool:
            group.add_argument(flag(f.name), action=argparse.BooleanOptionalAction, help=help_text)
        else:
            group.add_argument(
                flag(f.name),
                type=kind,
                choices=f.metadata["choices"],
                metavar=None if f.metadata["choices"] else f.name.upper(),
                help=help_text,
            )
    run = groups[RUN]
    run.add_argument(
        "--config", metavar="FILE", help="TOML file of settings (keys as the flags, with _)"
    )
    run.add_argument(
        "--no-preset",
        action="store_true",
        help="the built-in defaults and the flags only, even where configs/ has a preset "
        "(default: off)",
    )
    run.add_argument(
        "--resume",
        metavar="PATH",
        help="continue a checkpoint or a run folder's latest.pt; flags may change all "
        "but the model's shape",
    )
    run.add_argument("--quiet", action="store_true", help="no progress output (default: off)")
    return parser


def resumed_config(
    saved: Mapping[str, Any],
    settings: Mapping[str, Any],
    config_file: str | Path | None = None,
    no_preset: bool = False,
) -> TrainConfig:
    """The config a checkpoint was trained with, then the settings given now (a longer
    budget, more workers); settings that would change the model's shape are refused."""
    if config_file is not None or no_preset:
        raise UsageError("--resume continues the saved settings; give changes as flags")
    config = TrainConfig.from_dict(saved, source="checkpoint config")
    for name in model_settings():
        if name in settings and settings[name] != getattr(config, name):
            raise UsageError(
                f"{flag(name)} cannot change on --resume (the checkpoint has "
                f"{getattr(config, name)!r})"
            )
    return config.replace(settings, source="command line").validate()


def layered_config(
    settings: Mapping[str, Any],
    config_file: str | Path | None = None,
    no_preset: bool = False,
) -> tuple[TrainConfig, Path | None]:
    """Defaults, then the preset (`config_file`, else the shipped one for the env unless
    `no_preset`), then `settings`; the config and the preset it took."""
    preset: Path | None = None
    if config_file is not None:
        if no_preset:
            raise UsageError("--config and --no-preset contradict each other; give one")
        preset = Path(config_file)
    elif not no_preset:
        preset = find_preset(settings.get("env", TrainConfig.env), settings.get("noisy", False))
    config = TrainConfig()
    if preset is not None:
        config = config.replace(load_toml(preset), source=str(preset))
    return config.replace(settings, source="command line").validate(), preset


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The `TrainConfig` settings among a3c-train's parsed flags."""
    return {k: v for k, v in vars(args).items() if k not in COMMAND_FLAGS}


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Path | None]:
    """Layer defaults, then the preset, then explicit flags; return the config and its preset."""
    return layered_config(
        settings_of(args), getattr(args, "config", None), getattr(args, "no_preset", False)
    )


def eval_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="a3c-eval", description="Play a saved agent and report its scores.")
    parser.add_argument(
        "path", metavar="PATH", help="checkpoint file, or a run folder (plays its best.pt)"
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes to play (default: the run's --eval-episodes)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="episode i starts from reset(seed + i), so a logged score replays exactly "
        "(default: the evaluator's seeds)",
    )
    policy = parser.add_mutually_exclusive_group()
    policy.add_argument(
        "--greedy",
        dest="greedy",
        action="store_true",
        default=None,
        help="always take the most probable action (default: the run's --eval-policy)",
    )
    policy.add_argument(
        "--sample", dest="greedy", action="store_false", help="sample actions from the policy"
    )
    parser.add_argument(
        "--eval-noise",
        dest="noise",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="NoisyNet agents: a new noise sample per episode, or the mean weights "
        "(default: the run's --eval-noise)",
    )
    parser.add_argument(
        "--video",
        metavar="FILE.mp4",
        type=Path,
        default=None,
        help="record every episode into this video (needs the video extra)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    return parser


def plot_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="a3c-plot",
        description="Learning curves of runs: evaluation score against agent steps and wall "
        "time, and smoothed training returns; several runs are overlaid.",
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run folders")
    parser.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    parser.add_argument(
        "--smoothing", type=int, default=20, help="training episodes per mean (default: 20)"
    )
    return parser


def export_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="a3c-export",
        description="Write a trained agent as one TorchScript or ONNX graph from observation "
        "to action, with a JSON file beside it that says what goes in and out.",
    )
    parser.add_argument(
        "path", metavar="PATH", help="checkpoint file, or a run folder (exports its best.pt)"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="file to write")
    parser.add_argument(
        "--format",
        choices=("onnx", "torchscript"),
        default=None,
        help="graph format (default: by the output's suffix: .onnx, or .pt for TorchScript)",
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="output the policy's parameters (logits, or a Gaussian's mean and std) for the "
        "caller to sample from, not the greedy action (default: off)",
    )
    return parser


def parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    """Every console command's parser, by command name."""
    return {
        "a3c-train": build_parser,
        "a3c-eval": eval_parser,
        "a3c-plot": plot_parser,
        "a3c-export": export_parser,
    }


_DEFAULT = re.compile(r"^(?P<help>.*?)\s*\(default: (?P<default>.*)\)$", re.DOTALL)


def options_markdown(parser: argparse.ArgumentParser) -> str:
    """The parser's --help as a Markdown table (flag, default, meaning), topic by topic.

    docs/options.md's tables are this function's output, so they say what --help says.
    """
    rows = ["| option | default | meaning |", "|---|---|---|"]
    titled = len([g for g in parser._action_groups if _shown(g._group_actions)]) > 2
    for group in parser._action_groups:
        actions = _shown(group._group_actions)
        if not actions:
            continue
        if titled and group.title not in ("positional arguments", "options"):
            rows.append(f"| **{group.title}** | | |")
        for action in actions:
            match = _DEFAULT.match(action.help or "")
            meaning, default = (match["help"], match["default"]) if match else (action.help, "")
            meaning = (meaning or "").replace("|", "\\|")
            rows.append(f"| {_option_cell(action)} | {default} | {meaning} |")
    return "\n".join(rows) + "\n"


def _shown(actions: list[argparse.Action]) -> list[argparse.Action]:
    """The options worth a row: every command has --help and --version, said once in prose."""
    return [a for a in actions if a.help != argparse.SUPPRESS and a.dest not in ("help", "version")]


def _option_cell(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    if isinstance(action, argparse.BooleanOptionalAction):
        return f"`--[no-]{action.option_strings[0][2:]}`"
    flags = ", ".join(f"`{flag}`" for flag in action.option_strings)
    if action.choices:
        return f"{flags} {{{','.join(map(str, action.choices))}}}"
    return flags


_OPTIONS_BLOCK = re.compile(
    r"(<!-- options: (?P<command>[\w-]+) -->\n).*?(<!-- end options -->)", re.DOTALL
)


def filled_options_tables(markdown: str) -> str:
    """`markdown` with each ``<!-- options: COMMAND -->`` block holding that command's table."""
    builders = parsers()

    def fill(match: re.Match[str]) -> str:
        command = match["command"]
        if command not in builders:
            raise UsageError(f"no command named {command!r} for an options table")
        return match[1] + options_markdown(builders[command]()) + match[3]

    return _OPTIONS_BLOCK.sub(fill, markdown)
