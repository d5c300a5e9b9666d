"""End to end: the real `a3c-train` command, real processes, real files on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import only_run, read_csv

from a3c.checkpoint import load_checkpoint
from a3c.config import DEFAULT_LR, TrainConfig
from a3c.presets import load_toml
from a3c.profile import CONTINUOUS_ENT_COEF
from a3c.trainer import train

# A policy that always pushes one way scores about 9; a uniformly random one about 22.
CLEARLY_ABOVE_RANDOM = 100.0


@pytest.mark.slow
def test_two_workers_learn_cartpole_and_leave_a_complete_run(cli, tmp_path: Path) -> None:
    result = cli.run(
        "a3c-train",
        "--env",
        "CartPole-v1",
        "--workers",
        "2",
        "--seed",
        "1",
        "--total-steps",
        "40000",
        "--run-dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert cli.wait_for_no_leftovers() == []

    run = only_run(tmp_path)
    assert run.name.startswith("CartPole-v1-")
    config = TrainConfig.from_dict(load_toml(run / "config.toml"))
    assert (config.workers, config.total_steps, config.seed) == (2, 40000, 1)

    evals = read_csv(run / "eval.csv")
    steps = [int(row["step"]) for row in evals]
    assert steps == sorted(steps) and steps[-1] >= 40000
    assert {row["episodes"] for row in evals} == {str(config.eval_episodes)}
    assert max(float(row["mean"]) for row in evals) >= CLEARLY_ABOVE_RANDOM

    episodes = read_csv(run / "episodes.csv")
    assert {row["worker"] for row in episodes} == {"0", "1"}
    overshoot = config.workers * config.envs_per_worker * config.t_max  # one last rollout each
    assert sum(int(row["length"]) for row in episodes) <= 40000 + overshoot

    latest = load_checkpoint(run / "checkpoints" / "latest.pt")
    assert latest["step"] >= 40000
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    assert best["best_score"] == max(float(row["mean"]) for row in evals)

    # The best checkpoint replays to the score the evaluator logged for it.
    replay = cli.run("a3c-eval", str(run), "--json", timeout=120)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["mean"] == pytest.approx(best["best_score"])


# FrozenLake-v1 is slippery: the best policy reaches the goal about 3 times in 4, a random
# one about once in 70.
FROZEN_LAKE_LEARNED = 0.5


@pytest.mark.slow
def test_built_in_defaults_learn_frozen_lake_from_one_hot_states(cli, tmp_path: Path) -> None:
    """An environment no preset was tuned for, with Discrete observations, no flag but the
    budget; its best agent replays through a3c-eval."""
    result = cli.run(
        "a3c-train",
        "--env",
        "FrozenLake-v1",
        "--workers",
        "2",
        "--seed",
        "1",
        "--total-steps",
        "200000",
        "--target-score",
        "0.8",
        "--run-dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    run = only_run(tmp_path)
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    assert best["best_score"] >= FROZEN_LAKE_LEARNED
    assert best["model"]["encoder.layer.weight"].shape[1] == 16  # one input per state
    replay = cli.run("a3c-eval", str(run), "--json", timeout=120)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["mean"] == pytest.approx(best["best_score"])


def test_serial_mode_runs_in_process(tmp_path: Path) -> None:
    config = TrainConfig(
        env="CartPole-v1",
        workers=0,
        total_steps=3000,
        eval_interval=1000,
        eval_episodes=2,
        run_dir=str(tmp_path),
    )
    result = train(config, quiet=True)
    assert result.steps >= 3000 and not result.interrupted
    evals = read_csv(result.run_dir / "eval.csv")
    assert [int(row["step"]) // 1000 for row in evals][:3] == [1, 2, 3]
    assert (result.run_dir / "checkpoints" / "latest.pt").is_file()


def test_an_image_environment_trains_on_frames_with_continuous_actions(tmp_path: Path) -> None:
    """CarRacing: RGB images become the Atari encoder's grayscale frames, and its three
    bounded actions (steer, gas, brake) a Gaussian policy; training, evaluation and the
    checkpoint all work on them."""
    config = TrainConfig(
        env="CarRacing-v3",
        workers=0,
        total_steps=200,
        eval_interval=200,
        eval_episodes=1,
        eval_max_steps=100,
        run_dir=str(tmp_path),
    )
    result = train(config, quiet=True)
    assert result.steps >= 200 and not result.interrupted
    assert len(read_csv(result.run_dir / "eval.csv")) >= 1
    latest = load_checkpoint(result.run_dir / "checkpoints" / "latest.pt")
    assert latest["model"]["encoder.layers.0.weight"].dim() == 4  # a convolution over frames
    assert latest["model"]["policy.mean.weight"].shape[0] == 3


def test_target_score_stops_training_early(tmp_path: Path) -> None:
    config = TrainConfig(
        env="CartPole-v1",
        workers=0,
        total_steps=50_000,
        eval_interval=500,
        eval_episodes=1,
        target_score=5.0,
        run_dir=str(tmp_path),
    )
    result = train(config, quiet=True)
    assert result.steps < 1000


@pytest.mark.slow
def test_sixteen_workers_on_two_cores_run_to_the_budget(cli, tmp_path: Path) -> None:
    result = cli.run(
        "a3c-train",
        "--env",
        "CartPole-v1",
        "--workers",
        "16",
        "--total-steps",
        "20000",
        "--eval-interval",
        "5000",
        "--run-dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert cli.wait_for_no_leftovers() == []
    run = only_run(tmp_path)
    assert load_checkpoint(run / "checkpoints" / "latest.pt")["step"] >= 20000
    workers = {row["worker"] for row in read_csv(run / "episodes.csv")}
    assert workers == {str(rank) for rank in range(16)}


# Well above random (about 22) and any single fixed action (about 9); CartPole's maximum is 500.
NOISY_CARTPOLE_LEARNED = 400.0


@pytest.mark.slow
def test_noisy_cartpole_learns_without_an_entropy_bonus(cli, tmp_path: Path) -> None:
    """`--noisy` picks the NoisyNet preset, logs each noisy layer's sigma, and its best agent
    replays through a3c-eval with the mean weights (and plays with sampled noise on demand)."""
    result = cli.run(
        "a3c-train",
        "--env",
        "CartPole-v1",
        "--noisy",
        "--workers",
        "2",
        "--seed",
        "1",
        "--total-steps",
        "100000",
        "--target-score",
        "475",
        "--run-dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    run = only_run(tmp_path)
    config = TrainConfig.from_dict(load_toml(run / "config.toml"))
    assert config.noisy and config.entropy_bonus == 0.0 and config.envs_per_worker == 1
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    assert best["best_score"] >= NOISY_CARTPOLE_LEARNED
    losses = read_csv(run / "losses.csv")
    sigmas = [float(row["sigma_policy"]) for row in losses]
    assert sigmas and all(0 < sigma < 1 for sigma in sigmas)
    assert {row["sigma_encoder"] for row in losses} == {""}
    replay = cli.run("a3c-eval", str(run), "--json", timeout=120)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["mean"] == pytest.approx(best["best_score"])
    sampled = cli.run("a3c-eval", str(run), "--eval-noise", "--json", timeout=120)
    assert sampled.returncode == 0, sampled.stderr
    assert json.loads(sampled.stdout)["noise"] is True


@pytest.mark.slow
def test_continuous_agent_trains_saves_and_replays(cli, tmp_path: Path) -> None:
    """Pendulum: a Box action space end to end; a3c-eval plays the Gaussian's mean, so the
    logged best score replays exactly, twice. Without a preset the run records the entropy
    bonus for continuous actions it used."""
    result = cli.run(
        "a3c-train",
        "--env",
        "Pendulum-v1",
        "--no-preset",
        "--workers",
        "2",
        "--total-steps",
        "20000",
        "--eval-interval",
        "10000",
        "--eval-episodes",
        "2",
        "--run-dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    run = only_run(tmp_path)
    saved = load_toml(run / "config.toml")
    assert (saved["ent_coef"], saved["lr"]) == (CONTINUOUS_ENT_COEF, DEFAULT_LR)
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    assert best["model"]["policy.mean.weight"].shape == (1, 128)
    replays = [
        cli.run("a3c-eval", str(run), "--episodes", "2", "--json", timeout=120) for _ in range(2)
    ]
    for replay in replays:
        assert replay.returncode == 0, replay.stderr
    scores = [json.loads(replay.stdout) for replay in replays]
    assert scores[0]["mean"] == pytest.approx(best["best_score"])
    assert scores[0]["scores"] == scores[1]["scores"]
