"""The Pong reference run: train PongNoFrameskip-v4 with the shipped preset for up to an hour.

    python scripts/pong_reference.py --minutes 60 --workers 2

Runs the real `a3c-train` and stops it with SIGTERM when the time is up. a3c-train handles it
like Ctrl-C: it writes its final checkpoint and logs. Not SIGINT, which a shell's background
job starts with ignored, so the run would go on. Then prints evaluation score against
minutes and agent steps as a Markdown table, and draws the curve with a3c-plot (needs the
`plot` extra).
"""

from __future__ import annotations

import argparse
import csv
import signal
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/reference"))
    parser.add_argument("--plot", type=Path, default=Path("docs/pong_reference.png"))
    parser.add_argument("train_args", nargs="*", help="more a3c-train flags, after --")
    args = parser.parse_args()

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
    with (run / "eval.csv").open() as file:
        rows = list(csv.DictReader(file))
    print(f"\n{run}\n| minutes | agent steps | evaluation mean ± std | min | max |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {float(row['seconds']) / 60:.1f} | {int(row['step']):,} | "
              f"{float(row['mean']):.1f} ± {float(row['std']):.1f} | "
              f"{float(row['min']):g} | {float(row['max']):g} |")  # fmt: skip
    plot = [str(bin_dir / "a3c-plot"), str(run), "-o", str(args.plot)]
    subprocess.run(plot, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
