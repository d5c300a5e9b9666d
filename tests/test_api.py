"""The Python API: train, evaluate and load_agent, and docs/python.md's example as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import a3c
from a3c.evaluator import EVAL_SEED_OFFSET

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    page = (REPO / "docs" / "python.md").read_text()
    example = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert example is not None
    (tmp_path / "example.py").write_text(example[1])
    result = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "one episode:" in result.stdout and "evaluation:" in result.stdout
    assert (tmp_path / "runs").is_dir()


def play(agent: a3c.agent.Agent, seed: int, max_steps: int) -> float:
    """One episode from reset(seed), as a user of the agent would play it."""
    env = agent.make_env()
    observation, _ = env.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    state, score = None, 0.0
    for _ in range(max_steps):
        action, state = agent.act(observation, state, generator=generator)
        observation, reward, terminated, truncated, _ = env.step(action)
        score += float(reward)
        if terminated or truncated:
            break
    env.close()
    return score


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "raw_observations"),
    [
        ({"env": "CartPole-v1", "total_steps": 3000}, False),
        ({"env": "Pendulum-v1", "total_steps": 2000, "eval_max_steps": 100}, False),
        ({"env": "FrozenLake-v1", "total_steps": 3000}, True),
        pytest.param(
            {"env": "PongNoFrameskip-v4", "total_steps": 640, "eval_max_steps": 120},
            False,
            marks=pytest.mark.atari,
        ),
    ],
    ids=["discrete", "continuous", "one-hot", "atari"],
)
def test_a_loaded_agent_plays_the_evaluator_s_episodes(
    tmp_path: Path, settings: dict, raw_observations: bool
) -> None:
    result = a3c.train(
        **settings, workers=0, eval_interval=1000, eval_episodes=3, run_dir=str(tmp_path),
        quiet=True,
    )  # fmt: skip
    agent = a3c.load_agent(result.run_dir)
    seed = agent.config.seed + EVAL_SEED_OFFSET
    max_steps = agent.config.eval_max_steps
    scores = [play(agent, seed + episode, max_steps) for episode in range(3)]
    # a3c-eval playing each of the evaluator's episodes alone: the same games, exactly.
    alone = [a3c.evaluate(result.run_dir, episodes=1, seed=seed + i)["mean"] for i in range(3)]
    assert scores == alone
    # Played side by side, one batched forward pass may move a continuous action in its
    # last bits.
    assert scores == pytest.approx(a3c.evaluate(result.run_dir)["scores"], rel=1e-6)
    if raw_observations:  # the environment's own states are one-hot encoded by the agent
        state = 5
        encoded = agent.observation(np.eye(16, dtype=np.float32)[state])
        assert np.array_equal(agent.observation(state), encoded)


def test_settings_are_checked_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(a3c.UsageError, match="unknown setting 'learning_rate'"):
        a3c.train(env="CartPole-v1", learning_rate=0.1, run_dir=str(tmp_path))
    with pytest.raises(a3c.UsageError, match="--t-max must be >= 1"):
        a3c.train(a3c.TrainConfig(env="CartPole-v1"), t_max=0, run_dir=str(tmp_path))
    assert not any(tmp_path.iterdir())
