"""Environment factory: real gymnasium environments and clear refusals."""

from __future__ import annotations

import gymnasium as gym
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


class ActionSpaceEnv(gym.Env):
    """A one-step env whose action space is the one a test asks for."""

    def __init__(self, action_space: gym.Space, render_mode: str | None = None) -> None:
        self.action_space = action_space
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, True, False, {}


REFUSED_ACTION_SPACES = {
    "MultiDiscrete": gym.spaces.MultiDiscrete([3, 2]),
    "MultiBinary": gym.spaces.MultiBinary(4),
    "Dict": gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    "Tuple": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))),
}
for _name, _space in REFUSED_ACTION_SPACES.items():
    gym.register(f"a3c-test/{_name}Actions-v0", ActionSpaceEnv, kwargs={"action_space": _space})


@pytest.mark.parametrize("kind", sorted(REFUSED_ACTION_SPACES))
def test_other_action_spaces_are_refused_in_one_line(kind: str) -> None:
    env_id = f"a3c-test/{kind}Actions-v0"
    with pytest.raises(
        UsageError, match=rf"^{env_id} has a {kind} action space; a3c supports Discrete and Box"
    ):
        describe_env(env_id)


def test_box_actions_are_described_with_their_bounds() -> None:
    info = describe_env("Pendulum-v1")
    assert info.continuous and info.n_actions == 1 and info.action_shape == (1,)
    assert info.action_low == (-2.0,) and info.action_high == (2.0,)
    assert not describe_env("CartPole-v1").continuous


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
    assert not info.vector_observations  # so the defaults of one-hot states apply
    env.close()


def test_vector_observations_are_flat_features_only() -> None:
    assert describe_env("CartPole-v1").vector_observations
    assert describe_env("Pendulum-v1").vector_observations
    assert not describe_env("PongNoFrameskip-v4").vector_observations


def test_other_observation_spaces_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match=r"^Blackjack-v1 has Tuple observations .*Discrete"):
        describe_env("Blackjack-v1")
