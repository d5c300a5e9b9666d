"""Environment construction: one `make_env` for training, evaluation and `a3c-eval`."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import ale_py
import gymnasium as gym
import numpy as np

from a3c.errors import UsageError

# Importing ale_py registers the Atari ids; saying so keeps every process, spawned
# workers included, seeing the same registry.
gym.register_envs(ale_py)


@dataclass(frozen=True)
class EnvInfo:
    """What the model needs to know about an environment."""

    observation_shape: tuple[int, ...]
    observation_dtype: np.dtype
    n_actions: int

    @classmethod
    def of(cls, env: gym.Env) -> EnvInfo:
        assert isinstance(env.action_space, gym.spaces.Discrete)
        return cls(
            observation_shape=tuple(env.observation_space.shape or ()),
            observation_dtype=np.dtype(env.observation_space.dtype),
            n_actions=int(env.action_space.n),
        )


def _check_registered(env_id: str) -> None:
    registry = gym.envs.registry
    if env_id in registry:
        return
    close = difflib.get_close_matches(env_id, list(registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UsageError(f"unknown environment {env_id!r}{hint}")


def make_env(env_id: str) -> gym.Env:
    """The environment with the wrappers a3c uses; episode statistics are the real scores."""
    _check_registered(env_id)
    env = gym.make(env_id)
    return gym.wrappers.RecordEpisodeStatistics(env)


def describe_env(env_id: str) -> EnvInfo:
    """Check that a3c can train on `env_id` and return its shapes; `UsageError` if not."""
    env = make_env(env_id)
    env.close()
    action_space, observation_space = env.action_space, env.observation_space
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UsageError(
            f"{env_id} has a {type(action_space).__name__} action space; "
            "a3c supports discrete actions only"
        )
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        raise UsageError(
            f"{env_id} has observations {observation_space}; a3c supports flat vectors"
        )
    return EnvInfo.of(env)
