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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, SupportsFloat

import gymnasium as gym
import numpy as np

from a3c.errors import UsageError
from a3c.faults import maybe_inject_into_batch
from a3c.host import available_cores
from a3c.profile import ATARI, FRAMES, EnvProfile, family_of, observation_kind

ATARI_FRAME_SKIP = 4
ATARI_NOOP_MAX = 30


def _make(env_id: str, render_mode: str | None) -> gym.Env:
    """`gym.make`, with a missing package named in one line instead of a traceback."""
    try:
        return gym.make(env_id, render_mode=render_mode)
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        extra = family_of(env_id).extra
        if extra is not None:
            raise UsageError(
                f"{env_id} needs gymnasium's {extra} packages: pip install 'a3c[{extra}]'"
            ) from None
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"{env_id} needs a package that is not installed: {reason}") from None


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
    return _make_wrapped(env_id, frame_size, render_mode, noop_max, fire_at_life_start)[0]


def _make_wrapped(
    env_id: str,
    frame_size: int = 42,
    render_mode: str | None = None,
    noop_max: int = ATARI_NOOP_MAX,
    fire_at_life_start: bool = False,
) -> tuple[gym.Env, str | None]:
    """`make_env`'s environment and the kind of its own observations (None: unsupported)."""
    family = family_of(env_id)
    env = _make(env_id, render_mode)
    kind = observation_kind(env.observation_space, family)
    if family is ATARI:
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
    elif kind == FRAMES:
        env = square_grayscale_frames(env, frame_size)
    elif kind is not None and not isinstance(env.observation_space, gym.spaces.Box):
        env = FlatObservation(env)
    return gym.wrappers.RecordEpisodeStatistics(env), kind


def evaluation_env(env_id: str, frame_size: int, render_mode: str | None = None) -> gym.Env:
    """An env that plays evaluation episodes: the evaluator's, `a3c-eval`'s and its video's."""
    return make_env(env_id, frame_size=frame_size, render_mode=render_mode, fire_at_life_start=True)


def describe_env(env_id: str, frame_size: int = 42) -> EnvProfile:
    """Check that a3c can train on `env_id` and return its profile; `UsageError` if not."""
    env, kind = _make_wrapped(env_id, frame_size=frame_size)
    env.close()
    return EnvProfile.of(env_id, env, kind)


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

    profile: EnvProfile

    def reset(self, seeds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Start every environment's first episode; its observations [K, ...] and lives [K]."""
        ...

    def step(self, actions: np.ndarray) -> BatchStep:
        """One action per environment, as the policy sampled it ([K, *action_shape])."""
        ...

    def close(self) -> None: ...


class GymEnvBatch:
    """K gymnasium environments from `make_env`, stepped one after another."""

    def __init__(self, envs: list[gym.Env], profile: EnvProfile) -> None:
        self.envs = envs
        self.profile = profile

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
                (count, *self.profile.observation_shape), self.profile.observation_dtype
            ),
            rewards=np.zeros(count),
            terminated=np.zeros(count, dtype=bool),
            truncated=np.zeros(count, dtype=bool),
            lives=np.zeros(count, dtype=np.int64),
        )
        for index, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(
                self.profile.env_action(actions[index])
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
    if family_of(env_id) is not ATARI:
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

    def __init__(
        self,
        settings: dict[str, Any],
        count: int,
        frame_size: int,
        threads: int,
        profile: EnvProfile,
    ) -> None:
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
        self.profile = profile
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
    profile: EnvProfile,
    count: int,
    frame_size: int,
    workers: int,
    process_name: str,
    noop_max: int = ATARI_NOOP_MAX,
) -> EnvBatch:
    """A worker's K environments: ale-py's vector env for the Atari ids it can play as
    `make_env` does; `make_env`'s, stepped in a loop, for the others. The reliability
    tests' fault injection (a3c/faults.py) wraps whichever it is."""
    env_id = profile.env_id
    settings = _vector_settings(env_id, noop_max)
    batch: EnvBatch
    if settings is not None:
        threads = vector_env_threads(workers)
        batch = AtariVectorBatch(settings, count, frame_size, threads, profile)
    else:
        envs = [make_env(env_id, frame_size=frame_size, noop_max=noop_max) for _ in range(count)]
        batch = GymEnvBatch(envs, profile)
    return maybe_inject_into_batch(batch, process_name)


def atari_path(env_id: str, envs_per_worker: int, workers: int) -> str | None:
    """How the workers step an Atari id's games, for the run's first lines; None otherwise."""
    if family_of(env_id) is not ATARI:
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
