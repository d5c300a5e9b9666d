"""`a3c-plot`: learning curves of one or more runs, from their CSV logs (needs matplotlib)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from a3c.errors import UsageError

FIGURE_SIZE = (15.0, 4.0)  # inches; at DPI below: 1500 x 400 pixels
DPI = 100


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of one of a run's CSV logs; none while the run has not written it yet."""
    if not path.is_file():
        return []
    with path.open() as file:
        return list(csv.DictReader(file))


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over up to `window` values, defined from the first value on."""
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


def plot_runs(runs: Sequence[Path], output: Path, smoothing: int = 20) -> Any:
    """Draw every run into one figure, save it as PNG, and return the figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("a3c-plot needs matplotlib: pip install 'a3c[plot]'") from None
    for run in runs:
        if not (run / "eval.csv").is_file() and not (run / "episodes.csv").is_file():
            raise UsageError(f"{run} is not a run folder (no eval.csv or episodes.csv)")

    figure, (by_steps, by_time, training) = plt.subplots(1, 3, figsize=FIGURE_SIZE, dpi=DPI)
    for index, run in enumerate(runs):
        color = f"C{index}"
        label = run.name
        evals = read_csv(run / "eval.csv")
        if evals:
            steps = np.array([int(r["step"]) for r in evals], dtype=float)
            minutes = np.array([float(r["seconds"]) for r in evals]) / 60
            mean = np.array([float(r["mean"]) for r in evals])
            std = np.array([float(r["std"]) for r in evals])
            for axis, x in ((by_steps, steps), (by_time, minutes)):
                axis.plot(x, mean, color=color, marker="o", markersize=3, label=label)
                axis.fill_between(x, mean - std, mean + std, color=color, alpha=0.2)
        episodes = read_csv(run / "episodes.csv")
        if episodes:
            steps = np.array([int(r["step"]) for r in episodes], dtype=float)
            scores = np.array([float(r["score"]) for r in episodes])
            order = np.argsort(steps, kind="stable")
            training.plot(steps[order], _smooth(scores[order], smoothing), color=color,
                          label=label)  # fmt: skip
    by_steps.set(title="evaluation (mean ± std)", xlabel="agent steps", ylabel="score")
    by_time.set(title="evaluation (mean ± std)", xlabel="wall-clock minutes", ylabel="score")
    training.set(title=f"training episodes (mean of last {smoothing})", xlabel="agent steps",
                 ylabel="score")  # fmt: skip
    for axis in (by_steps, by_time, training):
        axis.grid(alpha=0.3)
    by_steps.legend(loc="best", fontsize="small")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=DPI)
    plt.close(figure)
    return figure
