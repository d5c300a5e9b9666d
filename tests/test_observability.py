"""TensorBoard tags, the CSV logs, a3c-plot, and training without the optional extras."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import hide_packages, only_run, read_csv

SHORT_RUN = ["--env", "CartPole-v1", "--workers", "2", "--total-steps", "8000",
             "--eval-interval", "4000", "--eval-episodes", "2"]  # fmt: skip

TAGS = [
    "charts/episodic_return", "charts/episodic_length", "charts/SPS", "charts/learning_rate",
    "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/grad_norm",
    "eval/episodic_return", "eval/episodic_return_std", "eval/episodic_length",
    "eval/best_episodic_return",
]  # fmt: skip


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    from helpers import Cli

    runs = []
    for seed in ("1", "2"):
        root = tmp_path_factory.mktemp(f"runs{seed}")
        result = Cli().run("a3c-train", *SHORT_RUN, "--seed", seed, "--run-dir", str(root))
        assert result.returncode == 0, result.stderr
        runs.append(only_run(root))
    return runs


def test_tensorboard_has_every_tag_with_finite_values(two_runs: list[Path]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(two_runs[0]))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    for tag in TAGS:
        assert tag in scalars, f"missing {tag}"
        values = [event.value for event in events.Scalars(tag)]
        assert values and all(math.isfinite(v) for v in values), tag


def test_loss_statistics_are_logged_as_csv(two_runs: list[Path]) -> None:
    rows = read_csv(two_runs[0] / "losses.csv")
    assert {row["worker"] for row in rows} == {"0", "1"}
    assert all(float(row["entropy"]) > 0 for row in rows)
    assert all(int(row["updates"]) > 0 for row in rows)


def test_a_resumed_run_keeps_its_csv_header(tmp_path: Path) -> None:
    """losses.csv written before a column existed gets rows that fit its own header."""
    from a3c.metrics import LossStats, RunDirectory

    old_columns = "worker,step,updates,policy_loss,value_loss,entropy,grad_norm,learning_rate"
    (tmp_path / "losses.csv").write_text(old_columns + "\n0,10,20,0.1,0.2,0.6,1.0,0.001\n")
    folder = RunDirectory(tmp_path)
    folder.losses.write(LossStats(1, 20, 20, 0.3, 0.4, 0.5, 2.0, 0.001, sigma_policy=0.02))
    folder.close()
    rows = read_csv(tmp_path / "losses.csv")
    assert list(rows[1]) == old_columns.split(",")
    assert rows[1]["worker"] == "1" and rows[1]["learning_rate"] == "0.001"


def test_plot_overlays_runs_into_a_png(cli, two_runs: list[Path], tmp_path: Path) -> None:
    import matplotlib.image

    from a3c.plot import plot_runs

    figure = plot_runs(two_runs, tmp_path / "inline.png")
    by_steps, by_time, training = figure.axes
    for axis in (by_steps, by_time, training):
        assert len(axis.get_lines()) == 2
    legend = [text.get_text() for text in by_steps.get_legend().get_texts()]
    assert legend == [run.name for run in two_runs]

    output = tmp_path / "curves.png"
    result = cli.run("a3c-plot", *map(str, two_runs), "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert matplotlib.image.imread(output).shape[:2] == (400, 1500)


def test_plot_refuses_a_folder_that_is_not_a_run(cli, tmp_path: Path) -> None:
    result = cli.run("a3c-plot", str(tmp_path), "-o", str(tmp_path / "x.png"))
    assert result.returncode == 2
    assert "is not a run folder" in result.stderr


def test_training_without_the_optional_extras_says_so_once(cli, tmp_path: Path) -> None:
    cli.env["PYTHONPATH"] = hide_packages(tmp_path / "hide", "tensorboard", "matplotlib")
    result = cli.run("a3c-train", *SHORT_RUN, "--run-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if "optional views" in line]
    assert len(notes) == 1
    assert "a3c[tensorboard]" in notes[0] and "a3c[plot]" in notes[0]
    run = only_run(tmp_path / "runs")
    assert not list(run.glob("events.out.tfevents*"))
    assert (run / "eval.csv").is_file() and (run / "losses.csv").is_file()
