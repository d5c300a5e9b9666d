"""Console entry points `a3c-train` and `a3c-eval`: parse, call, report, exit."""

from __future__ import annotations

import json
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

    parser = build_parser("a3c-train")
    parser.add_argument(
        "--resume",
        metavar="PATH",
        default=None,
        help="continue from a checkpoint (or a run folder's latest.pt) at its step, with its "
        "optimiser state and settings; flags given now override the saved settings",
    )
    parser.add_argument("--quiet", action="store_true", default=False, help="no progress output")
    args = parser.parse_args(argv)
    quiet, resume_path = args.quiet, args.resume
    del args.quiet, args.resume

    def body() -> int:
        resume, resume_from = None, None
        if resume_path is not None:
            from a3c.checkpoint import load_checkpoint, resolve_checkpoint_path

            resume_from = resolve_checkpoint_path(resume_path, prefer="latest")
            resume = load_checkpoint(resume_from)
            config, preset = resumed_config(resume["config"], args), None
        else:
            config, preset = config_from_args(args)
        from a3c.trainer import TrainingFailed, format_summary, train

        if preset is not None and not quiet:
            print(f"a3c: settings from {preset}", flush=True)
        try:
            result = train(config, quiet=quiet, resume=resume, resume_from=resume_from)
        except TrainingFailed as error:
            print(f"a3c-train: training failed: {error}", file=sys.stderr)
            return EXIT_FAILED
        if not quiet:
            print(format_summary(result), flush=True)
        return result.exit_code

    return _guarded("a3c-train", body)


def eval_main(argv: Sequence[str] | None = None) -> int:
    from a3c.config import OneLineParser

    parser = OneLineParser(prog="a3c-eval", description="Play a saved agent and report its scores.")
    parser.add_argument("path", help="checkpoint file, or a run folder (uses its best.pt)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to play (default: 10)")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="episode i starts from reset(seed + i) (default: the seed the evaluator used)",
    )
    policy = parser.add_mutually_exclusive_group()
    policy.add_argument(
        "--greedy",
        dest="greedy",
        action="store_true",
        default=None,
        help="always take the most probable action",
    )
    policy.add_argument(
        "--sample", dest="greedy", action="store_false", help="sample actions from the policy"
    )
    parser.add_argument(
        "--video",
        metavar="FILE.mp4",
        type=Path,
        default=None,
        help="record every episode into this video (needs: pip install 'a3c[video]')",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    def body() -> int:
        from a3c.evaluator import evaluate_checkpoint

        if args.episodes < 1:
            raise UsageError(f"--episodes must be >= 1 (got {args.episodes})")
        report = evaluate_checkpoint(
            args.path,
            episodes=args.episodes,
            seed=args.seed,
            greedy=args.greedy,
            video=args.video,
        )
        print(json.dumps(report) if args.json else format_report(report))
        return 0

    return _guarded("a3c-eval", body)


def format_report(report: dict[str, object]) -> str:
    return (
        f"{report['env']} ({report['episodes']} episodes, {report['policy']}, "
        f"seed {report['seed']}): score {report['mean']:.2f} ± {report['std']:.2f}, "
        f"min {report['min']:g}, max {report['max']:g}, mean length {report['mean_length']:.1f}"
    )


def plot_main(argv: Sequence[str] | None = None) -> int:
    from a3c.config import OneLineParser

    parser = OneLineParser(
        prog="a3c-plot",
        description="Learning curves of runs: evaluation score against agent steps and wall "
        "time, and smoothed training returns; several runs are overlaid.",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    parser.add_argument(
        "--smoothing", type=int, default=20, help="training episodes per mean (default: 20)"
    )
    args = parser.parse_args(argv)

    def body() -> int:
        from a3c.plot import plot_runs

        if args.smoothing < 1:
            raise UsageError(f"--smoothing must be >= 1 (got {args.smoothing})")
        plot_runs(args.runs, args.output, smoothing=args.smoothing)
        print(f"wrote {args.output}")
        return 0

    return _guarded("a3c-plot", body)
