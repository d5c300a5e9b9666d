"""`TrainConfig`: every hyperparameter, its default and its help text, written once.

The command-line parser, the TOML presets in ``configs/``, the ``config.toml`` of a run
and the config stored in checkpoints are all generated from the dataclass below.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a3c.errors import UsageError
from a3c.fields import (
    ENVIRONMENT,
    EVALUATION,
    MODEL,
    NODES,
    OPTIMISER,
    ROLLOUT,
    RUN,
    coerce,
    flag,
    option,
)
from a3c.host import available_cores

# The entropy bonus of a model without NoisyNet layers (docs/defaults.md: Taxi needs it).
DEFAULT_ENT_COEF = 0.05
DEFAULT_LR = 7e-4


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run. Budgets count agent steps, not emulator frames."""

    # ------------------------------------------------------------------ environment
    env: str = option(
        "CartPole-v1",
        group=ENVIRONMENT,
        help="gymnasium environment id; module:Id imports the module that registers it first",
        model=True,
    )
    env_kwargs: dict[str, Any] = option(  # noqa: RUF009 (a field with a default_factory)
        default_factory=dict,
        group=ENVIRONMENT,
        default_text="none",
        help="keyword arguments of the environment, as KEY=VALUE with TOML values "
        "(is_slippery=false)",
        model=True,
    )
    wrappers: list[str] = option(  # noqa: RUF009 (a field with a default_factory)
        default_factory=list,
        group=ENVIRONMENT,
        default_text="none",
        help="a gymnasium wrapper put on the environment before a3c's own processing, as "
        "module:callable or module:callable(key = value, ...); repeat it for more, in order",
        model=True,
    )
    max_episode_steps: int | None = option(
        None,
        group=ENVIRONMENT,
        help="end training and evaluation episodes after this many agent steps "
        "(a truncation: the return bootstraps from the value)",
        minimum=1,
    )
    observation: str = option(
        "auto",
        group=ENVIRONMENT,
        help="uint8 observations of the shape (H, W) or (H, W, 1 or 3): frames for the conv "
        "encoder, or flat values for the dense one; auto: frames from 32 pixels a side up",
        choices=("auto", "frames", "flat"),
        model=True,
    )
    seed: int = option(
        1, group=ENVIRONMENT, help="seed of worker 0; worker k uses seed + k", minimum=0
    )
    frame_size: int = option(
        42,
        group=ENVIRONMENT,
        help="image frames are resized to this square (84: the A3C paper's encoder)",
        choices=(42, 84),
        model=True,
    )
    clip_rewards: bool = option(
        False,
        group=ENVIRONMENT,
        help="learn from rewards clipped to [-1, 1]; logged scores stay unclipped",
    )
    life_loss_terminal: bool = option(
        False,
        group=ENVIRONMENT,
        help="Atari: learn as if a lost life ended the episode; logged scores are whole games",
    )
    normalize_obs: bool = option(
        True,
        group=ENVIRONMENT,
        help="standardise vector observations with running statistics (kept in checkpoints)",
        model=True,
    )
    scale_rewards: bool = option(
        True,
        group=ENVIRONMENT,
        help="learn from rewards divided by the running std of the discounted return",
        model=True,
    )
    # ----------------------------------------------------- rollout, returns and loss
    workers: int = option(
        default_factory=available_cores,
        group=ROLLOUT,
        default_text="CPU cores",
        help="training processes; 0 runs one worker inside the main process, for debugging",
        minimum=0,
    )
    total_steps: int = option(
        10_000_000,
        group=ROLLOUT,
        help="training budget in agent steps (an Atari agent step is 4 emulator frames)",
        minimum=1,
    )
    t_max: int = option(
        5, group=ROLLOUT, help="rollout length between two updates, in agent steps", minimum=1
    )
    envs_per_worker: int = option(
        8,
        group=ROLLOUT,
        help="environments each worker steps in lockstep, one batched forward pass for all",
        minimum=1,
    )
    gamma: float = option(0.99, group=ROLLOUT, help="discount factor", above=0.0, maximum=1.0)
    advantage: str = option(
        "gae",
        group=ROLLOUT,
        help="advantage estimator: generalised advantage estimation or plain n-step returns",
        choices=("gae", "nstep"),
    )
    gae_lambda: float = option(
        1.0,
        group=ROLLOUT,
        help="GAE lambda (1 equals the n-step advantage)",
        minimum=0.0,
        maximum=1.0,
    )
    ent_coef: float | None = option(
        None,
        group=ROLLOUT,
        help="entropy bonus coefficient (beta)",
        default_text="by spaces: 0.05, 0.01 or 0 (docs/defaults.md); 0 with --noisy",
        minimum=0.0,
    )
    vf_coef: float = option(0.5, group=ROLLOUT, help="value loss coefficient", above=0.0)
    # -------------------------------------------------------------------- optimiser
    optimizer: str = option(
        "adam",
        group=OPTIMISER,
        help="shared optimiser: Adam, or RMSprop with shared statistics (the A3C paper's)",
        choices=("adam", "rmsprop"),
    )
    lr: float | None = option(
        None,
        group=OPTIMISER,
        help="learning rate of the shared optimiser",
        default_text="by spaces: 7e-4 or 2e-4 (docs/defaults.md)",
        above=0.0,
    )
    lr_decay: bool = option(
        False, group=OPTIMISER, help="decay the learning rate linearly to 0 at total_steps"
    )
    optimizer_eps: float = option(
        1e-8, group=OPTIMISER, help="epsilon of Adam or RMSprop", above=0.0
    )
    rmsprop_alpha: float = option(
        0.99, group=OPTIMISER, help="smoothing constant of RMSprop", above=0.0, maximum=1.0
    )
    max_grad_norm: float = option(
        40.0, group=OPTIMISER, help="clip each update's gradient norm to this", above=0.0
    )
    # ------------------------------------------------------------------------ model
    lstm: bool = option(
        False,
        group=MODEL,
        help="LSTM core (the Atari presets' choice); without it, the feed-forward A3C FF",
        model=True,
    )
    hidden_size: int = option(
        128,
        group=MODEL,
        help="width of the encoder output and the LSTM",
        minimum=1,
        model=True,
    )
    conv_channels: int = option(
        32,
        group=MODEL,
        help="channels of the four convolutions on 42x42 frames",
        minimum=1,
        model=True,
    )
    conv_activation: str = option(
        "elu",
        group=MODEL,
        help="activation after each of those convolutions",
        choices=("elu", "relu"),
        model=True,
    )
    precision: str = option(
        "auto",
        group=MODEL,
        help="frame encoder's arithmetic; auto: bfloat16 on CPUs that have it natively",
        choices=("auto", "bfloat16", "float32"),
    )
    policy_std: str = option(
        "state",
        group=MODEL,
        help="continuous actions: Gaussian std from the state (A3C paper) or learned",
        choices=("state", "learned"),
        model=True,
    )
    noisy: bool = option(
        False,
        group=MODEL,
        help="NoisyNet-A3C: learned noise on the policy and value weights, one sample per rollout",
        model=True,
    )
    noise: str = option(
        "independent",
        group=MODEL,
        help="--noisy noise: independent per weight (the paper's A3C choice) or factorised",
        choices=("independent", "factorised"),
        model=True,
        noisy_only=True,
    )
    sigma_init: float | None = option(
        None,
        group=MODEL,
        help="--noisy initial sigma (independent) or sigma_0 (factorised)",
        default_text="0.017; 0.5 factorised",
        minimum=0.0,
        noisy_only=True,
    )
    noisy_dense: bool = option(
        False,
        group=MODEL,
        help="--noisy on the dense layers before the heads too (not convolutions or the LSTM)",
        model=True,
        noisy_only=True,
    )
    # ------------------------------------------------------------------- evaluation
    eval_interval: int = option(
        10_000,
        group=EVALUATION,
        help="evaluate the shared weights every this many agent steps",
        minimum=1,
    )
    eval_episodes: int = option(10, group=EVALUATION, help="episodes per evaluation", minimum=1)
    eval_max_steps: int = option(
        10_000,
        group=EVALUATION,
        help="cut an evaluation episode after this many agent steps",
        minimum=1,
    )
    eval_policy: str = option(
        "greedy",
        group=EVALUATION,
        help="evaluation actions: the most probable one, or sampled from the policy",
        choices=("greedy", "sample"),
    )
    eval_noise: bool = option(
        False,
        group=EVALUATION,
        help="--noisy: a new noise sample per evaluation episode, not the mean weights",
        noisy_only=True,
    )
    target_score: float | None = option(
        None, group=EVALUATION, help="stop training once an evaluation's mean score reaches this"
    )
    # ---------------------------------------------------------- checkpoints and run
    checkpoint_interval: int = option(
        100_000,
        group=RUN,
        help="write checkpoints/latest.pt every this many agent steps",
        minimum=1,
    )
    run_dir: str = option("runs", group=RUN, help="folder that receives one subfolder per run")
    max_restarts: int = option(
        3,
        group=RUN,
        help="restart crashed workers or the evaluator this many times in a run, then stop",
        minimum=0,
    )
    max_nonfinite_updates: int = option(
        10,
        group=RUN,
        help="stop after this many skipped updates in a row (non-finite loss or gradient)",
        minimum=1,
    )
    # ------------------------------------------------------------ several machines
    sync_interval: float = option(
        10.0,
        group=NODES,
        help="seconds between the machines' meetings, which average their weights",
        above=0.0,
    )
    outer_lr: float = option(
        1.0,
        group=NODES,
        help="a meeting's step along the mean of the machines' changes: 1 averages their "
        "weights, the machine count adds every change in full",
        above=0.0,
    )
    node_timeout: float = option(
        120.0,
        group=NODES,
        help="seconds a machine waits at a meeting for the others",
        above=0.0,
    )

    def validate(self) -> TrainConfig:
        """Raise `UsageError` naming the first out-of-range value; return self otherwise."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            meta = f.metadata
            name = flag(f.name)
            if meta["choices"] is not None and value not in meta["choices"]:
                raise UsageError(
                    f"{name} must be one of {', '.join(map(str, meta['choices']))} (got {value!r})"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise UsageError(f"{name} must be a finite number (got {value})")
            if meta["minimum"] is not None and value < meta["minimum"]:
                raise UsageError(f"{name} must be >= {meta['minimum']:g} (got {value})")
            if meta["above"] is not None and value <= meta["above"]:
                raise UsageError(f"{name} must be > {meta['above']:g} (got {value})")
            if meta["maximum"] is not None and value > meta["maximum"]:
                raise UsageError(f"{name} must be <= {meta['maximum']:g} (got {value})")
        if not self.env:
            raise UsageError("--env must name a gymnasium environment")
        if "render_mode" in self.env_kwargs:
            raise UsageError("--env-kwargs render_mode: a3c sets it (a3c-eval --video renders)")
        if self.node_timeout <= self.sync_interval:
            # A node that stops early calls its meeting at once and waits for the others'.
            raise UsageError(
                f"--node-timeout ({self.node_timeout:g} s) must be longer than "
                f"--sync-interval ({self.sync_interval:g} s)"
            )
        if not self.noisy:
            for f in dataclasses.fields(self):
                if f.metadata["noisy_only"] and getattr(self, f.name) != f.default:
                    raise UsageError(f"{flag(f.name)} applies to NoisyNet models: add --noisy")
        return self

    @property
    def entropy_bonus(self) -> float:
        """The entropy coefficient in use: ent_coef where set, else 0.05, or 0 with NoisyNet.
        A trainer first fills ent_coef for the environment's spaces (`EnvProfile.fill_defaults`).

        The NoisyNet paper drops the bonus for NoisyNet-A3C: the learned noise explores.
        """
        if self.ent_coef is not None:
            return self.ent_coef
        return 0.0 if self.noisy else DEFAULT_ENT_COEF

    @property
    def learning_rate(self) -> float:
        """The learning rate at the start: lr where set (a trainer fills it), else 7e-4."""
        return DEFAULT_LR if self.lr is None else self.lr

    @property
    def serial(self) -> bool:
        """True when the single worker runs inside the main process."""
        return self.workers == 0

    def learning_rate_at(self, step: int) -> float:
        """The learning rate after `step` agent steps: constant, or linear decay to 0."""
        if not self.lr_decay:
            return self.learning_rate
        return self.learning_rate * max(0.0, 1.0 - step / self.total_steps)

    def to_dict(self) -> dict[str, Any]:
        """Plain values only, so the dict survives TOML and `torch.load(weights_only=True)`."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> TrainConfig:
        """Build a config from a preset, a config.toml or a checkpoint, checking names and types."""
        return cls().replace(values, source)

    def replace(self, values: Mapping[str, Any], source: str = "config") -> TrainConfig:
        """A copy with `values` applied; unknown names and wrong types raise `UsageError`."""
        known = {f.name: f for f in dataclasses.fields(self)}
        hints = typing.get_type_hints(type(self))
        checked = {}
        for name, value in values.items():
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UsageError(f"{source}: unknown setting {name!r}{hint}")
            checked[name] = coerce(value, hints[name], f"{source}: {name}")
        return dataclasses.replace(self, **checked)


def model_settings() -> tuple[str, ...]:
    """The settings that shape the model: a resumed run must keep the saved ones."""
    return tuple(f.name for f in dataclasses.fields(TrainConfig) if f.metadata["model"])
