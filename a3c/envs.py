"""Environment construction: one `make_env` for training, evaluation and `a3c-eval`.

Atari games come from ale-py, whose ROMs ship inside the package. Two id families behave
differently, and their scores are not comparable:

- ``<Game>NoFrameskip-v4``: the emulator steps one frame per action; our wrapper repeats
  each action for 4 frames and max-pools the last two (Mnih et al. 2015). Deterministic
  apart from 1-30 no-op actions at the start of each episode.
- ``ALE/<Game>-v5``: the emulator itself repeats each action for 4 frames and, with
  probability 0.25 per frame, repeats the previous action instead (sticky actions,
  Machado et al. 2018). The wrapper does not skip again, so an agent step is 4 frames in
  both families.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np

from a3c.errors import UsageError

# Importing ale_py registers the Atari ids; saying so keeps every process, spawned
# workers included, seeing the same registry.
gym.register_envs(ale_py)

ATARI_FRAME_SKIP = 4
ATARI_NOOP_MAX = 30


@dataclass(frozen=True)
class EnvInfo:
    """What the model, the workers and the evaluator need to know about an environment."""

    observation_shape: tuple[int, ...]
    observation_dtype: np.dtype
    n_actions: int  # discrete: how many actions; continuous: how many action dimensions
    one_hot: bool = False  # Discrete states, one-hot encoded by the env's wrapper
    # Continuous (Box) actions only: the space's shape and its bounds, flattened.
    action_shape: tuple[int, ...] | None = None
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @classmethod
    def of(cls, env: gym.Env) -> EnvInfo:
        observation_shape = tuple(env.observation_space.shape or ())
        observation_dtype = np.dtype(env.observation_space.dtype)
        one_hot = isinstance(env.unwrapped.observation_space, gym.spaces.Discrete)
        space = env.action_space
        if isinstance(space, gym.spaces.Discrete):
            return cls(observation_shape, observation_dtype, int(space.n), one_hot)
        assert isinstance(space, gym.spaces.Box)
        return cls(
            observation_shape,
            observation_dtype,
            int(np.prod(space.shape)),
            one_hot,
            action_shape=tuple(space.shape),
            action_low=tuple(float(x) for x in space.low.ravel()),
            action_high=tuple(float(x) for x in space.high.ravel()),
        )

    @property
    def vector_observations(self) -> bool:
        """Flat feature vectors: not frames, and not one-hot encoded Discrete states."""
        return len(self.observation_shape) == 1 and not self.one_hot

    @property
    def continuous(self) -> bool:
        return self.action_shape is not None

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        low = np.asarray(self.action_low, dtype=np.float64)
        high = np.asarray(self.action_high, dtype=np.float64)
        return low, high, np.isfinite(low) & np.isfinite(high)

    def env_action(self, action: np.ndarray) -> Any:
        """What the env receives for one of the policy's actions.

        Discrete: the index. Continuous: the policy acts in [-1, 1] per dimension, mapped
        linearly onto the space's bounds and clipped to them, so one initial spread of the
        Gaussian fits any bounds; a dimension without finite bounds passes unchanged. The
        loss keeps the unclipped sample (a3c/policy.py).
        """
        if self.action_shape is None:
            return int(action)
        low, high, bounded = self._bounds
        clipped = np.clip(action, -1.0, 1.0)
        scaled = np.where(bounded, low + (clipped + 1.0) * 0.5 * (high - low), action)
        return scaled.astype(np.float32).reshape(self.action_shape)


def _check_registered(env_id: str) -> None:
    registry = gym.envs.registry
    if env_id in registry:
        return
    removed = re.fullmatch(r"(\w+?)Deterministic-v[04]", env_id)
    if removed:
        game = removed.group(1)
        raise UsageError(
            f"{env_id} was removed from ale-py; use {game}NoFrameskip-v4 "
            f"(a3c skips 4 frames itself) or ALE/{game}-v5 (sticky actions)"
        )
    close = difflib.get_close_matches(env_id, list(registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UsageError(f"unknown environment {env_id!r}{hint}")


def entry_point(env_id: str) -> str:
    """Where gymnasium builds `env_id` from ("ale_py.env:AtariEnv", ...); "" for a callable."""
    _check_registered(env_id)
    point = gym.spec(env_id).entry_point
    return point if isinstance(point, str) else ""


def is_atari(env_id: str) -> bool:
    """True for ids whose environment is ale-py's emulator."""
    return entry_point(env_id).startswith("ale_py")


# gymnasium's families whose packages come with one of a3c's extras, by entry-point module.
EXTRAS = {"gymnasium.envs.box2d": "box2d", "gymnasium.envs.mujoco": "mujoco"}


def _make(env_id: str, render_mode: str | None) -> gym.Env:
    """`gym.make`, with a missing package named in one line instead of a traceback."""
    try:
        return gym.make(env_id, render_mode=render_mode)
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        entry_point = gym.spec(env_id).entry_point
        module = entry_point if isinstance(entry_point, str) else ""
        for family, extra in EXTRAS.items():
            if module.startswith(family):
                raise UsageError(
                    f"{env_id} needs gymnasium's {extra} packages: pip install 'a3c[{extra}]'"
                ) from None
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"{env_id} needs a package that is not installed: {reason}") from None


class OneHotObservation(gym.ObservationWrapper):
    """Discrete observations (toy-text states) as one-hot float vectors.

    A state's index is a name, not a magnitude: fed as one number, state 41 would look
    almost like state 40 to the encoder.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        assert isinstance(env.observation_space, gym.spaces.Discrete)
        self.size = int(env.observation_space.n)
        self.start = int(env.observation_space.start)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.size,), np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        one_hot = np.zeros(self.size, dtype=np.float32)
        one_hot[int(observation) - self.start] = 1.0
        return one_hot


def make_env(env_id: str, frame_size: int = 42, render_mode: str | None = None) -> gym.Env:
    """The environment with the wrappers a3c uses.

    `RecordEpisodeStatistics` is outermost, so the episode scores it reports are the
    game's real, unclipped scores of whole games. Atari frames become `frame_size` squared
    grayscale uint8 images; discrete observations become one-hot vectors.
    """
    _check_registered(env_id)
    if not is_atari(env_id):
        env = _make(env_id, render_mode)
        if isinstance(env.observation_space, gym.spaces.Discrete):
            env = OneHotObservation(env)
        return gym.wrappers.RecordEpisodeStatistics(env)
    env = _make(env_id, render_mode)
    emulator_skips = getattr(env.unwrapped, "_frameskip", 1) != 1
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=ATARI_NOOP_MAX,
        frame_skip=1 if emulator_skips else ATARI_FRAME_SKIP,
        screen_size=frame_size,
        grayscale_obs=True,
        scale_obs=False,  # uint8 frames: four times less to copy; the model scales them
    )
    return gym.wrappers.RecordEpisodeStatistics(env)


def describe_env(env_id: str, frame_size: int = 42) -> EnvInfo:
    """Check that a3c can train on `env_id` and return its shapes; `UsageError` if not."""
    env = make_env(env_id, frame_size=frame_size)
    env.close()
    action_space, observation_space = env.action_space, env.observation_space
    if not isinstance(action_space, gym.spaces.Discrete | gym.spaces.Box):
        raise UsageError(
            f"{env_id} has a {type(action_space).__name__} action space; "
            "a3c supports Discrete and Box actions"
        )
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) not in (
        1,
        2,
    ):
        raise UsageError(
            f"{env_id} has {type(observation_space).__name__} observations "
            f"{observation_space}; a3c supports flat vectors, Discrete states and Atari frames"
        )
    return EnvInfo.of(env)
