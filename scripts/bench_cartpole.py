"""Time to solve CartPole-v1 with the shipped preset, seed by seed.

Runs the real `a3c-train --env CartPole-v1 --workers 2 --seed S` for each seed, then reads
its eval.csv and prints the agent steps and wall-clock seconds (from the command's start,
process start-up included) at which an evaluation mean first reached the target.

    python scripts/bench_cartpole.py --seeds 1 2 3
    python scripts/bench_cartpole.py --seeds 1 2 3 -- --no-lstm --lr 0.002   # extra flags
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from a3c.host import describe_host


def first_reaching(eval_csv: Path, target: float) -> tuple[int, float, float] | None:
    """(step, seconds, mean) of the first evaluation whose mean reached `target`."""
    with eval_csv.open() as file:
        for row in csv.DictReader(file):
            if float(row["mean"]) >= target:
                return int(row["step"]), float(row["seconds"]), float(row["mean"])
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("extra", nargs="*", help="more a3c-train flags, after --")
    args = parser.parse_args()
    print(describe_host(), flush=True)

    rows = []
    with tempfile.TemporaryDirectory() as run_root:
        for seed in args.seeds:
            command = [
                str(Path(sys.executable).parent / "a3c-train"),
                "--env",
                args.env,
                "--workers",
                str(args.workers),
                "--seed",
                str(seed),
                "--target-score",
                str(args.target),
                "--run-dir",
                f"{run_root}/{seed}",
                "--quiet",
                *args.extra,
            ]
            started = time.time()
            subprocess.run(command, check=True)
            wall = time.time() - started
            eval_csv = next(Path(run_root, str(seed)).glob("*/eval.csv"))
            rows.append((seed, first_reaching(eval_csv, args.target), wall))

    print(f"{args.env}, {args.workers} workers, target {args.target:g}, flags: {args.extra}")
    print(f"{'seed':>4}  {'agent steps':>11}  {'seconds':>7}  {'eval mean':>9}  {'command s':>9}")
    for seed, reached, wall in rows:
        if reached is None:
            print(f"{seed:>4}  {'not reached':>11}  {'':>7}  {'':>9}  {wall:9.1f}")
        else:
            step, seconds, mean = reached
            print(f"{seed:>4}  {step:>11,}  {seconds:7.1f}  {mean:9.1f}  {wall:9.1f}")
    solved = sum(reached is not None for _, reached, _ in rows)
    print(f"solved {solved} of {len(rows)}")
    return 0 if solved == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
