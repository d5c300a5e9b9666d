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


@pytest.mark.parametrize(("env_id", "states"), [("Taxi-v4", 500), ("FrozenLake-v1", 16)])
def test_discrete_observations_become_one_hot_vectors(env_id: str, states: int) -> None:
    env = make_env(env_id)
    raw = env.unwrapped
    obs, _ = env.reset(seed=3)
    assert obs.shape == (states,) and obs.dtype == np.float32
    assert obs.sum() == 1.0 and obs[raw.s] == 1.0  # raw.s: the toy-text env's own state
    obs, *_ = env.step(1)
    assert obs.sum() == 1.0 and obs[raw.s] == 1.0
    info = describe_env(env_id)
    assert info.observation_shape == (states,) and info.one_hot
    env.close()


def test_other_observation_spaces_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match=r"^Blackjack-v1 has Tuple observations .*Discrete"):
        describe_env("Blackjack-v1")
