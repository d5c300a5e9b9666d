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

A worker steps its K environments as one `EnvBatch`. For Atari that is ale-py's C++
`AtariVectorEnv`, which does the skipping, pooling, grayscale, resizing and resets itself
without a Python loop; every other id, and the evaluator, uses gymnasium's wrappers.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, SupportsFloat

import ale_py
import gymnasium as gym
import numpy as np

from a3c.config import available_cores
from a3c.errors import UsageError
from a3c.faults import injects, maybe_inject

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
    one_hot: bool = False  # discrete states (Blackjack's tuple too), one-hot by `FlatObservation`
    # Continuous (Box) actions only: the space's shape and its bounds, flattened.
    action_shape: tuple[int, ...] | None = None
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @classmethod
    def of(cls, env: gym.Env) -> EnvInfo:
        observation_shape = tuple(env.observation_space.shape or ())
        observation_dtype = np.dtype(env.observation_space.dtype)
        one_hot = _discrete_parts_only(env.unwrapped.observation_space)
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
        """Flat feature vectors: not frames, and not one-hot encoded discrete states."""
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


def _leaf_spaces(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    """The spaces inside nested Tuples and Dicts; any other space is its own leaf."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for part in space.spaces for leaf in _leaf_spaces(part)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for part in space.spaces.values() for leaf in _leaf_spaces(part)]
    return [space]


DISCRETE_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _discrete_parts_only(space: gym.Space[Any]) -> bool:
    """Discrete, MultiDiscrete, MultiBinary, or a Tuple or Dict built only of those."""
    return all(isinstance(leaf, DISCRETE_SPACES) for leaf in _leaf_spaces(space))


def _flattenable(space: gym.Space[Any]) -> bool:
    """A space `FlatObservation` can turn into one vector: vectors and discrete parts, nested."""
    return all(
        isinstance(leaf, DISCRETE_SPACES)
        or (isinstance(leaf, gym.spaces.Box) and len(leaf.shape) <= 1)
        for leaf in _leaf_spaces(space)
    )


def _is_image(space: gym.Space[Any]) -> bool:
    """uint8 pixels: (height, width), or (height, width, channels) with 1 or 3 channels."""
    if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8:
        return False
    return len(space.shape) == 2 or (len(space.shape) == 3 and space.shape[2] in (1, 3))


def square_grayscale_frames(env: gym.Env, frame_size: int) -> gym.Env:
    """An image environment's frames as `frame_size` squared grayscale uint8 images, the
    frames the Atari encoder reads. Colour goes as in Atari's preprocessing; the LSTM, where
    used, carries what one frame cannot show."""
    shape = env.observation_space.shape
    assert shape is not None
    if len(shape) == 3:
        if shape[2] == 3:
            env = gym.wrappers.GrayscaleObservation(env, keep_dim=False)
        else:
            env = gym.wrappers.ReshapeObservation(env, shape[:2])
    if env.observation_space.shape != (frame_size, frame_size):
        env = gym.wrappers.ResizeObservation(env, (frame_size, frame_size))
    return env


class FlatObservation(gym.ObservationWrapper):
    """Discrete states (toy text) and Tuple or Dict observations as one float32 vector.

    Each Discrete part becomes one-hot, as gymnasium's `flatten` writes it: a state's index
    is a name, not a magnitude, and fed as one number state 41 would look almost like state
    40 to the encoder. Blackjack's (sum, dealer card, usable ace) becomes 32 + 11 + 2 inputs.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.structured_space = env.observation_space
        flat = gym.spaces.flatten_space(self.structured_space)
        assert isinstance(flat, gym.spaces.Box)
        self.observation_space = gym.spaces.Box(
            flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32
        )

    def observation(self, observation: Any) -> np.ndarray:
        flat = gym.spaces.flatten(self.structured_space, observation)
        return np.asarray(flat, dtype=np.float32)


# Action 1 of the games FireAtLifeStart serves.
FIRE = 1


class FireAtLifeStart(gym.Wrapper):
    """Presses FIRE once when a game starts and after each lost life, a step of its own.

    In games like Breakout nothing happens until FIRE launches the ball, and a greedy
    policy whose most likely action at that moment is another one waits there until the
    step cap: Breakout's greedy evaluations scored 0 in games of 10,000 agent steps
    (docs/atari.md). SB3's and OpenAI Baselines' Atari wrappers press FIRE the same way.
    The extra step's frames and reward belong to the agent step before it (to `reset` at
    the start); the episode's length counts agent steps only.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0

    @staticmethod
    def needed(env: gym.Env) -> bool:
        """Games whose action 1 is FIRE (Baselines' test), among at least 3 actions."""
        meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
        return len(meanings) >= 3 and meanings[1] == "FIRE"

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.env.reset(**kwargs)
        # The game's first frames score nothing: the reset's FIRE step has no reward to keep.
        obs, _, terminated, truncated, info = self.env.step(FIRE)
        if terminated or truncated:
            return self.env.reset(**kwargs)
        self.lives = int(info.get("lives", 0))
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = int(info.get("lives", 0))
        if lives < self.lives and not (terminated or truncated):
            obs, fire_reward, terminated, truncated, info = self.env.step(FIRE)
            reward = float(reward) + float(fire_reward)
            lives = int(info.get("lives", 0))
        self.lives = lives
        return obs, reward, terminated, truncated, info


def make_env(
    env_id: str,
    frame_size: int = 42,
    render_mode: str | None = None,
    noop_max: int = ATARI_NOOP_MAX,
    fire_at_life_start: bool = False,
) -> gym.Env:
    """The environment with the wrappers a3c uses.

    `RecordEpisodeStatistics` is outermost, so the episode scores it reports are the
    game's real, unclipped scores of whole games. Atari frames, and other environments'
    images (CarRacing), become `frame_size` squared grayscale uint8 images; discrete, Tuple
    and Dict observations become one float vector (`FlatObservation`). Atari episodes
    start with 1 to `noop_max` no-op agent steps (none with 0). With `fire_at_life_start`
    (evaluation), games that wait for FIRE get it (`FireAtLifeStart`).
    """
    _check_registered(env_id)
    if not is_atari(env_id):
        env = _make(env_id, render_mode)
        space = env.observation_space
        if _is_image(space):
            env = square_grayscale_frames(env, frame_size)
        elif not isinstance(space, gym.spaces.Box) and _flattenable(space):
            env = FlatObservation(env)
        return gym.wrappers.RecordEpisodeStatistics(env)
    env = _make(env_id, render_mode)
    emulator_skips = getattr(env.unwrapped, "_frameskip", 1) != 1
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=1 if emulator_skips else ATARI_FRAME_SKIP,
        screen_size=frame_size,
        grayscale_obs=True,
        scale_obs=False,  # uint8 frames: four times less to copy; the model scales them
    )
    if fire_at_life_start and FireAtLifeStart.needed(env):
        env = FireAtLifeStart(env)
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
            f"{observation_space}; a3c supports flat vectors, discrete states, Tuple or Dict "
            "observations made of those, and images (uint8, grayscale or RGB)"
        )
    return EnvInfo.of(env)


@dataclass
class BatchStep:
    """One step of K environments. An episode that ended was reset in the same step."""

    observations: np.ndarray  # [K, ...]: a new episode's first observation where one ended
    rewards: np.ndarray  # [K] the games' real, unclipped rewards
    terminated: np.ndarray  # [K] bool
    truncated: np.ndarray  # [K] bool
    lives: np.ndarray  # [K] lives after the step; a new game's where an episode ended
    # The last observation of each episode cut by truncation, by index: it still has a value.
    final_observations: dict[int, np.ndarray] = field(default_factory=dict)
    episodes: list[tuple[int, float, int]] = field(default_factory=list)  # index, score, length


class EnvBatch(Protocol):
    """A worker's K environments, stepped together."""

    info: EnvInfo

    def reset(self, seeds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Start every environment's first episode; its observations [K, ...] and lives [K]."""
        ...

    def step(self, actions: np.ndarray) -> BatchStep:
        """One action per environment, as the policy sampled it ([K, *action_shape])."""
        ...

    def close(self) -> None: ...


class GymEnvBatch:
    """K gymnasium environments from `make_env`, stepped one after another."""

    def __init__(self, envs: list[gym.Env]) -> None:
        self.envs = envs
        self.info = EnvInfo.of(envs[0])

    def reset(self, seeds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        observations, lives = [], []
        for env, seed in zip(self.envs, seeds, strict=True):
            obs, info = env.reset(seed=seed)
            observations.append(obs)
            lives.append(int(info.get("lives", 0)))
        return np.stack(observations), np.array(lives)

    def step(self, actions: np.ndarray) -> BatchStep:
        count = len(self.envs)
        result = BatchStep(
            observations=np.empty(
                (count, *self.info.observation_shape), self.info.observation_dtype
            ),
            rewards=np.zeros(count),
            terminated=np.zeros(count, dtype=bool),
            truncated=np.zeros(count, dtype=bool),
            lives=np.zeros(count, dtype=np.int64),
        )
        for index, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(
                self.info.env_action(actions[index])
            )
            result.rewards[index] = float(reward)
            result.terminated[index], result.truncated[index] = terminated, truncated
            result.lives[index] = int(info.get("lives", 0))
            if terminated or truncated:
                if not terminated:
                    result.final_observations[index] = obs
                stats = info["episode"]  # RecordEpisodeStatistics: the real score
                result.episodes.append((index, float(stats["r"]), int(stats["l"])))
                obs, info = env.reset()
                result.lives[index] = int(info.get("lives", 0))
            result.observations[index] = obs
        return result

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _vector_settings(env_id: str, noop_max: int) -> dict[str, Any] | None:
    """`AtariVectorEnv` arguments that play `env_id` as `make_env` does; None if none can.

    Frame skip, pooling and sticky actions match `make_env` exactly. The no-op start
    differs in its draw: `AtariPreprocessing` takes 1 to 30 no-op agent steps (1 to 30
    frames for v4, 4 to 120 for v5, whose emulator skips), while ale-py draws 0 to
    ``noop_max - 1`` single frames; its `noop_max` is set so the longest start is the
    same. With `noop_max` 0, neither path takes a no-op.
    """
    if not is_atari(env_id):
        return None
    spec = gym.spec(env_id)
    kwargs = spec.kwargs
    skip = kwargs.get("frameskip", ATARI_FRAME_SKIP)
    plain = kwargs.get("obs_type", "rgb") == "rgb" and not kwargs.get("continuous", False)
    if not isinstance(skip, int) or not plain or spec.max_episode_steps is not None:
        return None
    if kwargs.get("mode") is not None or kwargs.get("difficulty") is not None:
        return None
    emulator_skips = skip != 1
    return {
        "game": kwargs["game"],
        "frameskip": skip if emulator_skips else ATARI_FRAME_SKIP,
        # make_env max-pools the last two frames only when it does the skipping itself.
        "maxpool": not emulator_skips,
        "noop_max": noop_max * skip + 1 if noop_max else 0,  # skip: frames per no-op step
        "repeat_action_probability": float(kwargs.get("repeat_action_probability", 0.25)),
        "full_action_space": bool(kwargs.get("full_action_space", False)),
        "max_num_frames_per_episode": int(kwargs.get("max_num_frames_per_episode", 108_000)),
    }


def vector_env_threads(workers: int) -> int:
    """Emulator threads per worker: the cores shared out among the workers, at least one.

    A worker waits while its games step, so one thread per worker keeps a core busy per
    worker; with fewer workers than cores the spare cores step games too.
    """
    return max(1, available_cores() // max(workers, 1))


class AtariVectorBatch:
    """K Atari games in ale-py's C++ `AtariVectorEnv`, preprocessed as `make_env` does."""

    def __init__(self, settings: dict[str, Any], count: int, frame_size: int, threads: int) -> None:
        from ale_py.vector_env import AtariVectorEnv
        from gymnasium.vector import AutoresetMode

        self.env = AtariVectorEnv(
            num_envs=count,
            num_threads=threads,
            img_height=frame_size,
            img_width=frame_size,
            grayscale=True,
            stack_num=1,  # the LSTM carries the history
            use_fire_reset=False,
            reward_clipping=False,  # the worker clips for learning; scores stay real
            episodic_life=False,
            life_loss_info=False,
            autoreset_mode=AutoresetMode.SAME_STEP,
            **settings,
        )
        space = self.env.single_action_space
        assert isinstance(space, gym.spaces.Discrete)
        self.info = EnvInfo((frame_size, frame_size), np.dtype(np.uint8), int(space.n))
        self.scores = np.zeros(count)
        self.lengths = np.zeros(count, dtype=np.int64)

    def reset(self, seeds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        obs, info = self.env.reset(seed=np.asarray(seeds, dtype=np.int32))
        self.scores[:] = 0.0
        self.lengths[:] = 0
        return obs[:, 0], np.asarray(info["lives"], dtype=np.int64)

    def step(self, actions: np.ndarray) -> BatchStep:
        obs, rewards, terminated, truncated, info = self.env.step(
            np.asarray(actions, dtype=np.int32).reshape(-1)
        )
        rewards = np.asarray(rewards, dtype=np.float64)
        self.scores += rewards
        self.lengths += 1
        result = BatchStep(
            observations=obs[:, 0],
            rewards=rewards,
            terminated=np.asarray(terminated, dtype=bool),
            truncated=np.asarray(truncated, dtype=bool),
            lives=np.asarray(info["lives"], dtype=np.int64),
        )
        for index in np.flatnonzero(result.terminated | result.truncated):
            if not result.terminated[index]:
                result.final_observations[int(index)] = info["final_obs"][index, 0]
            result.episodes.append(
                (int(index), float(self.scores[index]), int(self.lengths[index]))
            )
            self.scores[index] = 0.0
            self.lengths[index] = 0
        return result

    def close(self) -> None:
        self.env.close()


def make_env_batch(
    env_id: str,
    count: int,
    frame_size: int,
    workers: int,
    process_name: str,
    noop_max: int = ATARI_NOOP_MAX,
) -> EnvBatch:
    """A worker's K environments: ale-py's vector env for the Atari ids it can play as
    `make_env` does; `make_env`'s, stepped in a loop, for the others and for a process
    the fault injection of the reliability tests names (it wraps gymnasium envs)."""
    settings = _vector_settings(env_id, noop_max)
    if settings is not None and not injects(process_name):
        return AtariVectorBatch(settings, count, frame_size, vector_env_threads(workers))
    envs = [make_env(env_id, frame_size=frame_size, noop_max=noop_max) for _ in range(count)]
    return GymEnvBatch([maybe_inject(env, process_name) for env in envs])


def atari_path(env_id: str, envs_per_worker: int, workers: int) -> str | None:
    """How the workers step an Atari id's games, for the run's first lines; None otherwise."""
    if not is_atari(env_id):
        return None
    if _vector_settings(env_id, ATARI_NOOP_MAX) is None:
        return (
            f"{envs_per_worker} games per worker through gymnasium's AtariPreprocessing "
            f"(ale-py's AtariVectorEnv cannot play {env_id} as registered)"
        )
    threads = vector_env_threads(workers)
    return (
        f"{envs_per_worker} games per worker in ale-py's AtariVectorEnv, "
        f"{threads} emulator thread{'s' * (threads > 1)} each"
    )
