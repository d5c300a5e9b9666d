"""The Pong reference run: train PongNoFrameskip-v4 with the shipped preset for up to an hour.

    python scripts/pong_reference.py --minutes 60 --workers 2

Runs the real `a3c-train` and stops it with SIGTERM when the time is up. a3c-train handles it
like Ctrl-C: it writes its final checkpoint and logs. Not SIGINT, which a shell's background
job starts with ignored, so the run would go on. Then prints evaluation score against
minutes and agent steps as a Markdown table, a one-line summary (when the evaluation mean first
reached --target, and the mean evaluation over the --window minutes), and draws the curve with
a3c-plot (needs the `plot` extra).

    python scripts/pong_reference.py --compare RUN_A RUN_B RUN_C

summarises finished runs side by side, one row each, without training. Hogwild runs of one
preset differ by minutes in when they learn, so presets are compared over several runs made
in one session, alternating (A, B, A), on a machine doing nothing else.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from a3c.plot import read_csv


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/reference"))
    parser.add_argument("--plot", type=Path, default=Path("docs/pong_reference.png"))
    parser.add_argument("--target", type=float, default=18.0, help="score the summary times")
    parser.add_argument("--window", type=float, nargs=2, default=(20.0, 40.0),
                        metavar=("FROM", "TO"), help="minutes the mean spans")  # fmt: skip
    parser.add_argument("--compare", type=Path, nargs="+", metavar="RUN",
                        help="summarise these finished run folders; no training")  # fmt: skip
    parser.add_argument("train_args", nargs="*", help="more a3c-train flags, after --")
    args = parser.parse_args()
    if args.compare:
        print(summary_table(args.compare, args.target, args.window))
        return 0

    bin_dir = Path(sys.executable).parent
    command = [str(bin_dir / "a3c-train"), "--env", "PongNoFrameskip-v4",
               "--workers", str(args.workers), "--run-dir", str(args.run_dir),
               *args.train_args]  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(command)
    try:
        process.wait(timeout=args.minutes * 60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        process.wait()
    print(f"a3c-train ended after {(time.monotonic() - started) / 60:.1f} minutes")

    run = max(args.run_dir.glob("PongNoFrameskip-v4-*"), key=lambda p: p.stat().st_mtime)
    rows = read_csv(run / "eval.csv")
    print(f"\n{run}\n| minutes | agent steps | evaluation mean ± std | min | max |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {float(row['seconds']) / 60:.1f} | {int(row['step']):,} | "
              f"{float(row['mean']):.1f} ± {float(row['std']):.1f} | "
              f"{float(row['min']):g} | {float(row['max']):g} |")  # fmt: skip
    print("\n" + summary_table([run], args.target, args.window))
    plot = [str(bin_dir / "a3c-plot"), str(run), "-o", str(args.plot)]
    subprocess.run(plot, check=False)
    return 0


def summary_table(runs: list[Path], target: float, window: tuple[float, float]) -> str:
    start, end = window
    lines = [
        f"| run | agent steps/s | first mean ≥ {target:g} | after it | "
        f"mean, minutes {start:g} to {end:g} | last |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        rows = read_csv(run / "eval.csv")
        if not rows:
            lines.append(f"| {run} | no evaluations yet | | | | |")
            continue
        minutes = [float(row["seconds"]) / 60 for row in rows]
        steps = [int(row["step"]) for row in rows]
        means = [float(row["mean"]) for row in rows]
        # Steps per second up to the last evaluation: the whole run's pace, evaluations included.
        rate = steps[-1] / (minutes[-1] * 60)
        reached = next((i for i, mean in enumerate(means) if mean >= target), None)
        if reached is None:
            first, after = "not reached", ""
        else:
            first = (f"{minutes[reached]:.1f} min, {steps[reached] / 1e6:.2f} M "
                     f"({means[reached]:.1f})")  # fmt: skip
            later = means[reached + 1 :]
            after = f"{min(later):.1f} to {max(later):.1f} ({len(later)})" if later else "none"
        inside = [mean for m, mean in zip(minutes, means, strict=True) if start <= m <= end]
        in_window = sum(inside) / len(inside) if inside else float("nan")
        lines.append(
            f"| {run} | {rate:,.0f} | {first} | {after} | {in_window:.1f} ({len(inside)}) | "
            f"{means[-1]:.1f} at {minutes[-1]:.1f} min |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
