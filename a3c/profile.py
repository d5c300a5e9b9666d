"""What an environment is, answered once: its family, its observation and action kinds, and
the settings that follow from them.

Every other module asks an `EnvProfile` (or `family_of` for an id) rather than testing
id prefixes, entry points, space types or shapes itself: the model picks its encoder
from `profile.observation`, the trainer fills the defaults with `profile.fill_defaults`,
presets are found by `family_of(env_id).preset`, and `make_env` wraps by
`observation_kind`.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np

from a3c.config import DEFAULT_ENT_COEF, DEFAULT_LR, TrainConfig
from a3c.errors import UsageError, named

# Importing ale_py registers the Atari ids; saying so keeps every process, spawned
# workers included, seeing the same registry.
gym.register_envs(ale_py)


@dataclass(frozen=True)
class Family:
    """Environments gymnasium builds from one package, by their entry point's module."""

    name: str
    module: str  # entry points starting with this belong to the family
    extra: str | None = None  # the a3c extra that installs its packages
    preset: str | None = None  # the configs/ file for any of its ids without a preset


ATARI = Family("atari", "ale_py", preset="atari.toml")
FAMILIES = (
    ATARI,
    Family("mujoco", "gymnasium.envs.mujoco", extra="mujoco", preset="mujoco.toml"),
    Family("box2d", "gymnasium.envs.box2d", extra="box2d"),
)
OTHER = Family("other", "")


def check_registered(env_id: str, imported: str | None = None) -> None:
    """`UsageError` with the closest ids unless gymnasium knows `env_id` (after importing
    the module `imported`, which was to register it)."""
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
    if imported is not None:
        raise UsageError(f"importing {imported} registered no environment {env_id!r}{hint}")
    package = " (one that a package registers: --env PACKAGE:ID imports it)"
    raise UsageError(f"unknown environment {env_id!r}{hint or package}")


def registered_id(env_id: str) -> str:
    """The id gymnasium knows `env_id` by. For ``module:Id`` (gymnasium's own syntax) the
    module, which registers the id when imported, is imported first: in this process and,
    since every process makes its environments through here, in each child too."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as error:  # whatever the user's module raises, one line names it
            raise UsageError(f"--env {env_id}: importing {module} failed: {named(error)}") from None
    check_registered(name, imported=module or None)
    return name


def family_of(env_id: str) -> Family:
    """The family of an id (`OTHER` for one built from a callable or elsewhere)."""
    point = gym.spec(registered_id(env_id)).entry_point
    module = point if isinstance(point, str) else ""
    return next((f for f in FAMILIES if module.startswith(f.module)), OTHER)


# ------------------------------------------------------------------ observation kinds

FRAMES = "frames"  # uint8 images: grayscale squares for the conv encoder
VECTOR = "vector"  # flat features, standardised with running statistics
ONE_HOT = "one_hot"  # discrete states (and Tuples or Dicts of them), one-hot encoded
GRID = "grid"  # small uint8 arrays of symbols (MiniGrid's 7x7x3), flat and standardised
# uint8 arrays from this many pixels a side up are pictures; smaller ones are symbol grids.
FRAME_MIN_SIDE = 32

DISCRETE_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _leaf_spaces(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    """The spaces inside nested Tuples and Dicts; any other space is its own leaf."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for part in space.spaces for leaf in _leaf_spaces(part)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for part in space.spaces.values() for leaf in _leaf_spaces(part)]
    return [space]


def _is_image(space: gym.Space[Any]) -> bool:
    """uint8 pixels: (height, width), or (height, width, channels) with 1 or 3 channels."""
    if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8:
        return False
    return len(space.shape) == 2 or (len(space.shape) == 3 and space.shape[2] in (1, 3))


def observation_kind(
    space: gym.Space[Any], family: Family = OTHER, preference: str = "auto"
) -> str | None:
    """How an environment's own observations are fed to the model; None if a3c cannot.

    Atari screens are frames. Other uint8 arrays shaped like an image, (H, W) or (H, W, 1
    or 3), are frames from FRAME_MIN_SIDE pixels a side up, and below it grids of symbols
    (MiniGrid's object, colour and state ids), which resizing to 42x42 grayscale would
    blur; `preference` ("frames" or "flat", `--observation`) overrides that rule. Discrete
    states, and Tuples or Dicts made only of discrete parts, are one-hot; vectors, alone or
    mixed with discrete parts in a Tuple or Dict, are flat vectors (the discrete parts
    one-hot inside them).
    """
    if preference != "auto" and (family is ATARI or not _is_image(space)):
        raise UsageError(
            f"--observation {preference} applies to uint8 images and grids of other "
            f"environments than Atari's; these observations are {space}"
        )
    if family is ATARI:
        return FRAMES
    if _is_image(space):
        assert space.shape is not None
        if preference == "auto":
            return FRAMES if min(space.shape[:2]) >= FRAME_MIN_SIDE else GRID
        return FRAMES if preference == "frames" else GRID
    leaves = _leaf_spaces(space)
    if all(isinstance(leaf, DISCRETE_SPACES) for leaf in leaves):
        return ONE_HOT
    if all(
        isinstance(leaf, DISCRETE_SPACES)
        or (isinstance(leaf, gym.spaces.Box) and len(leaf.shape) <= 1)
        for leaf in leaves
    ):
        return VECTOR
    return None


# ------------------------------------------------------- defaults that follow the kinds

# A Gaussian's entropy has no upper bound: at 0.05 its bonus outweighs the policy gradient,
# the standard deviation keeps growing and the mean drifts past the action bounds (greedy
# HalfCheetah at -596: every action saturated). At 1e-4 (the A3C paper's MuJoCo value)
# Pendulum stops exploring and never learns; 0.01 learns both (docs/continuous.md).
CONTINUOUS_ENT_COEF = 0.01
# Vector observations with discrete actions: no entropy bonus and a lower learning rate.
# MountainCar-v0 is learned only so: any bonus (0.01 or 0.05) holds its policy uniform,
# and a uniform policy never reaches the flag; without one, Adam at 4e-4 or 7e-4 turns it
# into one fixed action first, while at 2e-4 it becomes a state-dependent swing that finds
# the flag (docs/defaults.md). Taxi's one-hot states still need DEFAULT_ENT_COEF.
VECTOR_ENT_COEF = 0.0
VECTOR_LR = 2e-4


@dataclass(frozen=True)
class EnvProfile:
    """One environment as a3c trains it: built once from its wrapped spaces, then handed
    to the model, the workers, the evaluator and the checkpoint's readers."""

    env_id: str
    family: str
    observation: str  # FRAMES, VECTOR, ONE_HOT or GRID: the model's input, after a3c's wrappers
    observation_shape: tuple[int, ...]
    observation_dtype: np.dtype
    n_actions: int  # discrete: how many actions; continuous: how many action dimensions
    # Continuous (Box) actions only: the space's shape and its bounds, flattened.
    action_shape: tuple[int, ...] | None = None
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @classmethod
    def of(cls, env_id: str, env: gym.Env, kind: str | None) -> EnvProfile:
        """The profile of `env`, made by `make_env` from an environment whose
        own observations are of `kind` (`observation_kind`); `UsageError` where a3c cannot
        train it."""
        space, observations = env.action_space, env.observation_space
        if not isinstance(space, gym.spaces.Discrete | gym.spaces.Box):
            raise UsageError(
                f"{env_id} has a {type(space).__name__} action space; "
                "a3c supports Discrete and Box actions"
            )
        shape = tuple(observations.shape or ())
        dimensions = len(shape) >= 1 if kind == GRID else len(shape) in (1, 2)
        if kind is None or not isinstance(observations, gym.spaces.Box) or not dimensions:
            raise UsageError(
                f"{env_id} has {type(observations).__name__} observations {observations}; "
                "a3c supports flat vectors, discrete states, Tuple or Dict observations "
                "made of those, and images or grids of symbols (uint8, one or three channels)"
            )
        base = cls(env_id, family_of(env_id).name, kind, shape, np.dtype(observations.dtype), 0)
        if isinstance(space, gym.spaces.Discrete):
            return dataclasses.replace(base, n_actions=int(space.n))
        return dataclasses.replace(
            base,
            n_actions=int(np.prod(space.shape)),
            action_shape=tuple(space.shape),
            action_low=tuple(float(x) for x in space.low.ravel()),
            action_high=tuple(float(x) for x in space.high.ravel()),
        )

    @property
    def continuous(self) -> bool:
        return self.action_shape is not None

    @property
    def frames(self) -> bool:
        return self.observation == FRAMES

    @property
    def normalizes_observations(self) -> bool:
        """Whether --normalize-obs applies: frames are standardised one by one in the
        encoder, and one-hot states need nothing."""
        return self.observation in (VECTOR, GRID)

    def fill_defaults(self, config: TrainConfig) -> TrainConfig:
        """`config` with the settings left unset that depend on the spaces filled in, so
        the run's config.toml and checkpoints record the values in use
        (docs/defaults.md)."""
        vector_discrete = self.observation == VECTOR and not self.continuous
        changes: dict[str, Any] = {}
        if config.ent_coef is None and not config.noisy:
            if self.continuous:
                changes["ent_coef"] = CONTINUOUS_ENT_COEF
            elif vector_discrete:
                changes["ent_coef"] = VECTOR_ENT_COEF
            else:
                changes["ent_coef"] = DEFAULT_ENT_COEF
        if config.lr is None:
            changes["lr"] = VECTOR_LR if vector_discrete else DEFAULT_LR
        return dataclasses.replace(config, **changes)

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
