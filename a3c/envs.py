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

A worker steps its K environments as one `EnvBatch` (a3c/batches.py).
"""

from __future__ import annotations

import importlib
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym
import numpy as np

from a3c.errors import UsageError, first_line, named
from a3c.profile import (
    ATARI,
    FRAMES,
    ONE_HOT,
    VECTOR,
    EnvProfile,
    family_of,
    observation_kind,
    registered_id,
)

if TYPE_CHECKING:
    from a3c.config import TrainConfig

ATARI_FRAME_SKIP = 4
ATARI_NOOP_MAX = 30


@dataclass(frozen=True)
class EnvRecipe:
    """How to make a run's environment, recorded in its config: every process that makes
    one (workers, evaluator, `a3c-eval`, its video, an exported agent's check) makes it
    from this through `make_env`."""

    env_id: str  # a registered id, or module:Id
    kwargs: dict[str, Any] = field(default_factory=dict)  # for gym.make
    wrappers: tuple[str, ...] = ()  # module:callable or module:callable(key = value, ...)
    max_episode_steps: int | None = None  # agent steps, after a3c's frame skipping
    frame_size: int = 42
    observation: str = "auto"  # --observation: how uint8 arrays are read

    @classmethod
    def of(cls, config: TrainConfig) -> EnvRecipe:
        return cls(
            config.env,
            dict(config.env_kwargs),
            tuple(config.wrappers),
            config.max_episode_steps,
            config.frame_size,
            config.observation,
        )

    @property
    def plain(self) -> bool:
        """Nothing but the registered id: no kwargs, wrappers or episode cap."""
        return not (self.kwargs or self.wrappers or self.max_episode_steps)


_WRAPPER = re.compile(r"\s*(?P<module>[\w.]+):(?P<name>[\w.]+)\s*(?:\((?P<args>.*)\))?\s*", re.S)


def parse_wrapper(spec: str) -> tuple[str, str, dict[str, Any]]:
    """``module:callable`` or ``module:callable(key = value, ...)``, values in TOML."""
    match = _WRAPPER.fullmatch(spec)
    args = (match["args"] or "").strip() if match else ""
    try:
        kwargs = tomllib.loads(f"kwargs = {{ {args} }}")["kwargs"] if args else {}
    except tomllib.TOMLDecodeError:
        match = None
    if match is None:
        raise UsageError(
            f"--wrapper {spec!r}: expected module:callable or module:callable(key = value, ...)"
        )
    return match["module"], match["name"], kwargs


def _wrapper(spec: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    module_name, name, kwargs = parse_wrapper(spec)
    try:
        target: Any = importlib.import_module(module_name)
        for part in name.split("."):
            target = getattr(target, part)
    except Exception as error:  # a missing module or name, or whatever importing it raised
        raise UsageError(f"--wrapper {spec}: {named(error)}") from None
    if not callable(target):
        raise UsageError(f"--wrapper {spec}: {module_name}:{name} is not callable")
    return target, kwargs


def _apply_wrappers(env: gym.Env, specs: Sequence[str]) -> gym.Env:
    for spec in specs:
        wrapper, kwargs = _wrapper(spec)
        try:
            wrapped = wrapper(env, **kwargs)
        except Exception as error:
            raise UsageError(f"--wrapper {spec}: {named(error)}") from None
        if not isinstance(wrapped, gym.Env):
            raise UsageError(f"--wrapper {spec} returned {type(wrapped).__name__}, not an env")
        env = wrapped
    return env


def as_recipe(recipe: EnvRecipe | str) -> EnvRecipe:
    """A bare id stands for the recipe of that id alone."""
    return EnvRecipe(recipe) if isinstance(recipe, str) else recipe


def _make(recipe: EnvRecipe, render_mode: str | None) -> gym.Env:
    """`gym.make`, with a missing package or a refused keyword named in one line."""
    env_id = registered_id(recipe.env_id)
    try:
        return gym.make(env_id, render_mode=render_mode, **recipe.kwargs)
    except TypeError as error:
        if not recipe.kwargs:
            raise
        raise UsageError(f"{env_id} refused --env-kwargs: {first_line(error)}") from None
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        extra = family_of(env_id).extra
        if extra is not None:
            raise UsageError(
                f"{env_id} needs gymnasium's {extra} packages: pip install 'a3c[{extra}]'"
            ) from None
        raise UsageError(
            f"{env_id} needs a package that is not installed: {first_line(error)}"
        ) from None


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


def flattener(env: gym.Env) -> Callable[[Any], np.ndarray] | None:
    """How `make_env`'s env one-hot encodes and flattens its observations; None where it
    does not."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, FlatObservation):
            return env.observation
        env = env.env
    return None


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
    recipe: EnvRecipe | str,
    render_mode: str | None = None,
    noop_max: int = ATARI_NOOP_MAX,
    fire_at_life_start: bool = False,
) -> gym.Env:
    """The environment a recipe (or a bare id) names, with the wrappers a3c uses.

    The recipe's own wrappers come first, right after `gym.make`. `RecordEpisodeStatistics`
    is outermost, so the episode scores it reports are the game's real, unclipped scores of
    whole games. Atari frames, and other environments' images (CarRacing), become
    `frame_size` squared grayscale uint8 images; discrete, Tuple and Dict observations
    become one float vector (`FlatObservation`). Atari episodes start with 1 to `noop_max`
    no-op agent steps (none with 0). With `fire_at_life_start` (evaluation), games that
    wait for FIRE get it (`FireAtLifeStart`). The recipe's episode cap counts agent steps.
    """
    return _make_wrapped(as_recipe(recipe), render_mode, noop_max, fire_at_life_start)[0]


def _make_wrapped(
    recipe: EnvRecipe,
    render_mode: str | None = None,
    noop_max: int = ATARI_NOOP_MAX,
    fire_at_life_start: bool = False,
) -> tuple[gym.Env, str | None]:
    """`make_env`'s environment and the kind of its own observations (None: unsupported)."""
    family = family_of(recipe.env_id)
    env = _apply_wrappers(_make(recipe, render_mode), recipe.wrappers)
    kind = observation_kind(env.observation_space, family, recipe.observation)
    if family is ATARI:
        emulator_skips = getattr(env.unwrapped, "_frameskip", 1) != 1
        env = gym.wrappers.AtariPreprocessing(
            env,
            noop_max=noop_max,
            frame_skip=1 if emulator_skips else ATARI_FRAME_SKIP,
            screen_size=recipe.frame_size,
            grayscale_obs=True,
            scale_obs=False,  # uint8 frames: four times less to copy; the model scales them
        )
        if fire_at_life_start and FireAtLifeStart.needed(env):
            env = FireAtLifeStart(env)
    elif kind == FRAMES:
        env = square_grayscale_frames(env, recipe.frame_size)
    elif kind in (VECTOR, ONE_HOT) and not isinstance(env.observation_space, gym.spaces.Box):
        env = FlatObservation(env)
    if recipe.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, recipe.max_episode_steps)
    return gym.wrappers.RecordEpisodeStatistics(env), kind


def evaluation_env(recipe: EnvRecipe | str, render_mode: str | None = None) -> gym.Env:
    """An env that plays evaluation episodes: the evaluator's, `a3c-eval`'s and its video's."""
    return make_env(recipe, render_mode=render_mode, fire_at_life_start=True)


def describe_env(recipe: EnvRecipe | str) -> EnvProfile:
    """Check that a3c can train on the recipe's environment and return its profile;
    `UsageError` if not."""
    recipe = as_recipe(recipe)
    env, kind = _make_wrapped(recipe)
    env.close()
    return EnvProfile.of(recipe.env_id, env, kind)
