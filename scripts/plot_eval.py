"""Learning curve of a run: evaluation score against agent steps and against wall minutes.

    python scripts/plot_eval.py runs/PongNoFrameskip-v4-20261202-170000 -o docs/pong.png

Needs matplotlib (`pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="run folder (with eval.csv)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_eval.py needs matplotlib: pip install matplotlib", file=sys.stderr)
        return 2
    with (args.run / "eval.csv").open() as file:
        rows = list(csv.DictReader(file))
    if not rows:
        print(f"{args.run / 'eval.csv'} has no evaluations yet", file=sys.stderr)
        return 2
    steps = [int(r["step"]) / 1e6 for r in rows]
    minutes = [float(r["seconds"]) / 60 for r in rows]
    mean = [float(r["mean"]) for r in rows]
    std = [float(r["std"]) for r in rows]
    low = [m - s for m, s in zip(mean, std, strict=True)]
    high = [m + s for m, s in zip(mean, std, strict=True)]

    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for axis, x, label in ((axes[0], steps, "agent steps (millions)"),
                           (axes[1], minutes, "wall-clock minutes")):  # fmt: skip
        axis.plot(x, mean, marker="o", markersize=3, label="evaluation mean")
        axis.fill_between(x, low, high, alpha=0.25, label="± std")
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("evaluation score (greedy episodes)")
    axes[0].legend(loc="lower right")
    figure.suptitle(args.title or args.run.name)
    figure.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
