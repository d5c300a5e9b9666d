"""Console entry points `a3c-train`, `a3c-eval`, `a3c-plot` and `a3c-export`: parse, call,
report, exit."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence

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
    from a3c.options import build_parser, settings_of

    args = build_parser("a3c-train").parse_args(argv)
    quiet = getattr(args, "quiet", False)

    def body() -> int:
        from a3c.api import train
        from a3c.trainer import TrainingFailed, format_summary

        try:
            result = train(
                resume=getattr(args, "resume", None),
                config_file=getattr(args, "config", None),
                preset=not getattr(args, "no_preset", False),
                quiet=quiet,
                **settings_of(args),
            )
        except TrainingFailed as error:
            print(f"a3c-train: training failed: {error}", file=sys.stderr)
            return EXIT_FAILED
        if not quiet:
            print(format_summary(result), flush=True)
        return result.exit_code

    return _guarded("a3c-train", body)


def eval_main(argv: Sequence[str] | None = None) -> int:
    from a3c.options import eval_parser

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


def plot_main(argv: Sequence[str] | None = None) -> int:
    from a3c.options import plot_parser

    args = plot_parser().parse_args(argv)

    def body() -> int:
        from a3c.plot import plot_runs

        if args.smoothing < 1:
            raise UsageError(f"--smoothing must be >= 1 (got {args.smoothing})")
        plot_runs(args.runs, args.output, smoothing=args.smoothing)
        print(f"wrote {args.output}")
        return 0

    return _guarded("a3c-plot", body)


def export_main(argv: Sequence[str] | None = None) -> int:
    from a3c.options import export_parser

    args = export_parser().parse_args(argv)

    def body() -> int:
        from a3c.export import export_agent

        info = export_agent(args.path, args.output, args.format, sample=args.sample)
        print(
            f"wrote {args.output} ({info['format']}, {info['env']}, step {info['step']:,}; "
            f"inputs {', '.join(info['inputs'])}; outputs {', '.join(info['outputs'])}) "
            f"and {args.output}.json"
        )
        return 0

    return _guarded("a3c-export", body)
