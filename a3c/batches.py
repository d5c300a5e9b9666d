"""A worker's K environments, stepped together as one `EnvBatch`.

For Atari that is ale-py's C++ `AtariVectorEnv`, which does the skipping, pooling,
grayscale, resizing and resets itself without a Python loop; every other recipe steps
`make_env`'s environments in a loop (`GymEnvBatch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from a3c.envs import ATARI_FRAME_SKIP, ATARI_NOOP_MAX, EnvRecipe, make_env
from a3c.faults import maybe_inject_into_batch
from a3c.host import available_cores
from a3c.profile import ATARI, EnvProfile, family_of, registered_id


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


def _vector_settings(recipe: EnvRecipe, noop_max: int) -> dict[str, Any] | None:
    """`AtariVectorEnv` arguments that play the recipe as `make_env` does; None if none can
    (a recipe with kwargs, Python wrappers or an episode cap takes gymnasium's path).

    Frame skip, pooling and sticky actions match `make_env` exactly. The no-op start
    differs in its draw: `AtariPreprocessing` takes 1 to 30 no-op agent steps (1 to 30
    frames for v4, 4 to 120 for v5, whose emulator skips), while ale-py draws 0 to
    ``noop_max - 1`` single frames; its `noop_max` is set so the longest start is the
    same. With `noop_max` 0, neither path takes a no-op.
    """
    if family_of(recipe.env_id) is not ATARI or not recipe.plain:
        return None
    spec = gym.spec(registered_id(recipe.env_id))
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
    recipe: EnvRecipe,
    profile: EnvProfile,
    count: int,
    workers: int,
    process_name: str,
    noop_max: int = ATARI_NOOP_MAX,
) -> EnvBatch:
    """A worker's K environments: ale-py's vector env for the Atari recipes it can play as
    `make_env` does; `make_env`'s, stepped in a loop, for the others. The reliability
    tests' fault injection (a3c/faults.py) wraps whichever it is."""
    settings = _vector_settings(recipe, noop_max)
    batch: EnvBatch
    if settings is not None:
        threads = vector_env_threads(workers)
        batch = AtariVectorBatch(settings, count, recipe.frame_size, threads, profile)
    else:
        envs = [make_env(recipe, noop_max=noop_max) for _ in range(count)]
        batch = GymEnvBatch(envs, profile)
    return maybe_inject_into_batch(batch, process_name)


def atari_path(recipe: EnvRecipe, envs_per_worker: int, workers: int) -> str | None:
    """How the workers step an Atari id's games, for the run's first lines; None otherwise."""
    if family_of(recipe.env_id) is not ATARI:
        return None
    if _vector_settings(recipe, ATARI_NOOP_MAX) is None:
        why = "as registered" if recipe.plain else "with env kwargs, wrappers or an episode cap"
        return (
            f"{envs_per_worker} games per worker through gymnasium's AtariPreprocessing "
            f"(ale-py's AtariVectorEnv cannot play {recipe.env_id} {why})"
        )
    threads = vector_env_threads(workers)
    return (
        f"{envs_per_worker} games per worker in ale-py's AtariVectorEnv, "
        f"{threads} emulator thread{'s' * (threads > 1)} each"
    )
