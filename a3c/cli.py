"""Console entry points `a3c-train`, `a3c-eval` and `a3c-plot`: parse, call, report, exit."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from a3c.errors import UsageError

EXIT_USAGE = 2
EXIT_FAILED = 1


def _guarded(prog: str, body: Callable[[], int]) -> int:
    """Run `body`; bad input becomes one line on stderr and exit code 2."""
    try:
        return body()
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def train_main(argv: Sequence[str] | None = None) -> int:
    from a3c.config import build_parser, config_from_args, resumed_config

    args = build_parser("a3c-train").parse_args(argv)
    quiet, resume_path = getattr(args, "quiet", False), getattr(args, "resume", None)

    def body() -> int:
        resume, resume_from = None, None
        if resume_path is not None:
            from a3c.checkpoint import load_checkpoint, resolve_checkpoint_path

            resume_from = resolve_checkpoint_path(resume_path, prefer="latest")
            resume = load_checkpoint(resume_from)
            config, preset = resumed_config(resume["config"], args), None
        else:
            config, preset = config_from_args(args)
        from a3c.trainer import TrainingFailed, format_summary, stop_helper_processes, train

        if preset is not None and not quiet:
            print(f"a3c: settings from {preset}", flush=True)
        try:
            result = train(config, quiet=quiet, resume=resume, resume_from=resume_from)
        except TrainingFailed as error:
            print(f"a3c-train: training failed: {error}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            stop_helper_processes()
        if not quiet:
            print(format_summary(result), flush=True)
        return result.exit_code

    return _guarded("a3c-train", body)


def eval_parser() -> argparse.ArgumentParser:
    from a3c.config import OneLineParser

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


def eval_main(argv: Sequence[str] | None = None) -> int:
    args = eval_parser().parse_args(argv)

    def body() -> int:
        from a3c.evaluator import evaluate_checkpoint

        if args.episodes is not None and args.episodes < 1:
            raise UsageError(f"--episodes must be >= 1 (got {args.episodes})")
        report = evaluate_checkpoint(
            args.path,
            episodes=args.episodes,
            seed=args.seed,
            greedy=args.greedy,
            video=args.video,
            noise=args.noise,
        )
        print(json.dumps(report) if args.json else format_report(report))
        return 0

    return _guarded("a3c-eval", body)


def format_report(report: dict[str, object]) -> str:
    text = (
        f"{report['env']} ({report['episodes']} episodes, {report['policy']}"
        f"{', sampled noise' if report['noise'] else ''}, "
        f"seed {report['seed']}): score {report['mean']:.2f} ± {report['std']:.2f}, "
        f"min {report['min']:g}, max {report['max']:g}, mean length {report['mean_length']:.1f}"
    )
    if "video_scores" in report:
        text += (
            f"\nwarning: replayed for the video, the episodes scored {report['video_scores']}: "
            f"{report['env']} does not repeat an episode from its seed and actions, so the "
            "video shows other games than the ones scored"
        )
    return text


def plot_parser() -> argparse.ArgumentParser:
    from a3c.config import OneLineParser

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


def plot_main(argv: Sequence[str] | None = None) -> int:
    args = plot_parser().parse_args(argv)

    def body() -> int:
        from a3c.plot import plot_runs

        if args.smoothing < 1:
            raise UsageError(f"--smoothing must be >= 1 (got {args.smoothing})")
        plot_runs(args.runs, args.output, smoothing=args.smoothing)
        print(f"wrote {args.output}")
        return 0

    return _guarded("a3c-plot", body)


def parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    """Every console command's parser, by command name."""
    from a3c.config import build_parser

    return {"a3c-train": build_parser, "a3c-eval": eval_parser, "a3c-plot": plot_parser}


_DEFAULT = re.compile(r"^(?P<help>.*?)\s*\(default: (?P<default>.*)\)$", re.DOTALL)


def options_markdown(parser: argparse.ArgumentParser) -> str:
    """The parser's --help as a Markdown table (flag, default, meaning), topic by topic.

    The README's options tables are this function's output, so they say what --help says.
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
