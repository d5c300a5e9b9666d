"""Environment factory: real gymnasium environments and clear refusals."""

from __future__ import annotations

import numpy as np
import pytest

from a3c.envs import describe_env, make_env
from a3c.errors import UsageError


def test_cartpole_observations_and_real_episode_scores() -> None:
    env = make_env("CartPole-v1")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,) and obs.dtype == np.float32
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(0)
        total += reward
        done = terminated or truncated
    assert info["episode"]["r"] == total
    env.close()


def test_describe_env() -> None:
    info = describe_env("CartPole-v1")
    assert info.observation_shape == (4,)
    assert info.n_actions == 2


def test_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(
        UsageError, match=r"unknown environment 'CartPol-v1'; did you mean CartPole"
    ):
        describe_env("CartPol-v1")


def test_unknown_id_without_close_match() -> None:
    with pytest.raises(UsageError, match=r"^unknown environment 'zzzzzzzz'$"):
        describe_env("zzzzzzzz")


def test_continuous_actions_are_refused() -> None:
    with pytest.raises(UsageError, match="Box action space; a3c supports discrete actions"):
        describe_env("Pendulum-v1")
