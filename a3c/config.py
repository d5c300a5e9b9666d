"""`TrainConfig`: every hyperparameter, its default and its help text, written once.

The command-line parser, the TOML presets in ``configs/``, the ``config.toml`` of a run
and the config stored in checkpoints are all generated from the dataclass below.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import re
import sys
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from a3c.errors import UsageError

# The topics of `a3c-train --help` and of the README's options table, in their order.
ENVIRONMENT = "environment"
ROLLOUT = "rollout, returns and loss"
OPTIMISER = "optimiser"
MODEL = "model"
EVALUATION = "evaluation"
RUN = "checkpoints and run"
NODES = "several machines (under torchrun)"
GROUPS = (ENVIRONMENT, ROLLOUT, OPTIMISER, MODEL, EVALUATION, RUN, NODES)


def _option(
    default: Any = dataclasses.MISSING,
    *,
    group: str,
    help: str,
    default_factory: Any = dataclasses.MISSING,
    default_text: str | None = None,
    choices: tuple[str, ...] | tuple[int, ...] | None = None,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> Any:
    """A dataclass field with its topic, help text and the range of values it accepts.

    ``minimum`` is inclusive, ``above`` exclusive; both are checked by `TrainConfig.validate`.
    ``default_text`` describes a default that depends on the machine.
    """
    assert group in GROUPS, group
    metadata = {
        "group": group,
        "help": help,
        "default_text": default_text,
        "choices": choices,
        "minimum": minimum,
        "above": above,
        "maximum": maximum,
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# Settings that only mean something with --noisy, and their values without it.
NOISE_SETTINGS = {
    "noise": "independent",
    "sigma_init": None,
    "noisy_dense": False,
    "eval_noise": False,
}

# The entropy bonus of a model without NoisyNet layers (docs/defaults.md: Taxi needs it).
DEFAULT_ENT_COEF = 0.05
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
DEFAULT_LR = 7e-4


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run. Budgets count agent steps, not emulator frames."""

    # ------------------------------------------------------------------ environment
    env: str = _option("CartPole-v1", group=ENVIRONMENT, help="gymnasium environment id")
    seed: int = _option(
        1, group=ENVIRONMENT, help="seed of worker 0; worker k uses seed + k", minimum=0
    )
    frame_size: int = _option(
        42,
        group=ENVIRONMENT,
        help="image frames are resized to this square (84: the A3C paper's encoder)",
        choices=(42, 84),
    )
    clip_rewards: bool = _option(
        False,
        group=ENVIRONMENT,
        help="learn from rewards clipped to [-1, 1]; logged scores stay unclipped",
    )
    life_loss_terminal: bool = _option(
        False,
        group=ENVIRONMENT,
        help="Atari: learn as if a lost life ended the episode; logged scores are whole games",
    )
    normalize_obs: bool = _option(
        True,
        group=ENVIRONMENT,
        help="standardise vector observations with running statistics (kept in checkpoints)",
    )
    scale_rewards: bool = _option(
        True,
        group=ENVIRONMENT,
        help="learn from rewards divided by the running std of the discounted return",
    )
    # ----------------------------------------------------- rollout, returns and loss
    workers: int = _option(
        default_factory=available_cores,
        group=ROLLOUT,
        default_text="CPU cores",
        help="training processes; 0 runs one worker inside the main process, for debugging",
        minimum=0,
    )
    total_steps: int = _option(
        10_000_000,
        group=ROLLOUT,
        help="training budget in agent steps (an Atari agent step is 4 emulator frames)",
        minimum=1,
    )
    t_max: int = _option(
        5, group=ROLLOUT, help="rollout length between two updates, in agent steps", minimum=1
    )
    envs_per_worker: int = _option(
        8,
        group=ROLLOUT,
        help="environments each worker steps in lockstep, one batched forward pass for all",
        minimum=1,
    )
    gamma: float = _option(0.99, group=ROLLOUT, help="discount factor", above=0.0, maximum=1.0)
    advantage: str = _option(
        "gae",
        group=ROLLOUT,
        help="advantage estimator: generalised advantage estimation or plain n-step returns",
        choices=("gae", "nstep"),
    )
    gae_lambda: float = _option(
        1.0,
        group=ROLLOUT,
        help="GAE lambda (1 equals the n-step advantage)",
        minimum=0.0,
        maximum=1.0,
    )
    ent_coef: float | None = _option(
        None,
        group=ROLLOUT,
        help="entropy bonus coefficient (beta)",
        default_text="by spaces: 0.05, 0.01 or 0 (docs/defaults.md); 0 with --noisy",
        minimum=0.0,
    )
    vf_coef: float = _option(0.5, group=ROLLOUT, help="value loss coefficient", above=0.0)
    # -------------------------------------------------------------------- optimiser
    optimizer: str = _option(
        "adam",
        group=OPTIMISER,
        help="shared optimiser: Adam, or RMSprop with shared statistics (the A3C paper's)",
        choices=("adam", "rmsprop"),
    )
    lr: float | None = _option(
        None,
        group=OPTIMISER,
        help="learning rate of the shared optimiser",
        default_text="by spaces: 7e-4 or 2e-4 (docs/defaults.md)",
        above=0.0,
    )
    lr_decay: bool = _option(
        False, group=OPTIMISER, help="decay the learning rate linearly to 0 at total_steps"
    )
    optimizer_eps: float = _option(
        1e-8, group=OPTIMISER, help="epsilon of Adam or RMSprop", above=0.0
    )
    rmsprop_alpha: float = _option(
        0.99, group=OPTIMISER, help="smoothing constant of RMSprop", above=0.0, maximum=1.0
    )
    max_grad_norm: float = _option(
        40.0, group=OPTIMISER, help="clip each update's gradient norm to this", above=0.0
    )
    # ------------------------------------------------------------------------ model
    lstm: bool = _option(
        False,
        group=MODEL,
        help="LSTM core (the Atari presets' choice); without it, the feed-forward A3C FF",
    )
    hidden_size: int = _option(
        128, group=MODEL, help="width of the encoder output and the LSTM", minimum=1
    )
    conv_channels: int = _option(
        32,
        group=MODEL,
        help="channels of the four convolutions on 42x42 frames",
        minimum=1,
    )
    conv_activation: str = _option(
        "elu",
        group=MODEL,
        help="activation after each of those convolutions",
        choices=("elu", "relu"),
    )
    precision: str = _option(
        "auto",
        group=MODEL,
        help="frame encoder's arithmetic; auto: bfloat16 on CPUs that have it natively",
        choices=("auto", "bfloat16", "float32"),
    )
    policy_std: str = _option(
        "state",
        group=MODEL,
        help="continuous actions: Gaussian std from the state (A3C paper) or learned",
        choices=("state", "learned"),
    )
    noisy: bool = _option(
        False,
        group=MODEL,
        help="NoisyNet-A3C: learned noise on the policy and value weights, one sample per rollout",
    )
    noise: str = _option(
        "independent",
        group=MODEL,
        help="--noisy noise: independent per weight (the paper's A3C choice) or factorised",
        choices=("independent", "factorised"),
    )
    sigma_init: float | None = _option(
        None,
        group=MODEL,
        help="--noisy initial sigma (independent) or sigma_0 (factorised)",
        default_text="0.017; 0.5 factorised",
        minimum=0.0,
    )
    noisy_dense: bool = _option(
        False,
        group=MODEL,
        help="--noisy on the dense layers before the heads too (not convolutions or the LSTM)",
    )
    # ------------------------------------------------------------------- evaluation
    eval_interval: int = _option(
        10_000,
        group=EVALUATION,
        help="evaluate the shared weights every this many agent steps",
        minimum=1,
    )
    eval_episodes: int = _option(10, group=EVALUATION, help="episodes per evaluation", minimum=1)
    eval_max_steps: int = _option(
        10_000,
        group=EVALUATION,
        help="cut an evaluation episode after this many agent steps",
        minimum=1,
    )
    eval_policy: str = _option(
        "greedy",
        group=EVALUATION,
        help="evaluation actions: the most probable one, or sampled from the policy",
        choices=("greedy", "sample"),
    )
    eval_noise: bool = _option(
        False,
        group=EVALUATION,
        help="--noisy: a new noise sample per evaluation episode, not the mean weights",
    )
    target_score: float | None = _option(
        None, group=EVALUATION, help="stop training once an evaluation's mean score reaches this"
    )
    # ---------------------------------------------------------- checkpoints and run
    checkpoint_interval: int = _option(
        100_000,
        group=RUN,
        help="write checkpoints/latest.pt every this many agent steps",
        minimum=1,
    )
    run_dir: str = _option("runs", group=RUN, help="folder that receives one subfolder per run")
    max_restarts: int = _option(
        3,
        group=RUN,
        help="restart crashed workers or the evaluator this many times in a run, then stop",
        minimum=0,
    )
    max_nonfinite_updates: int = _option(
        10,
        group=RUN,
        help="stop after this many skipped updates in a row (non-finite loss or gradient)",
        minimum=1,
    )
    # ------------------------------------------------------------ several machines
    sync_interval: float = _option(
        10.0,
        group=NODES,
        help="seconds between the machines' meetings, which average their weights",
        above=0.0,
    )
    node_timeout: float = _option(
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
            flag = _flag(f.name)
            if meta["choices"] is not None and value not in meta["choices"]:
                raise UsageError(
                    f"{flag} must be one of {', '.join(map(str, meta['choices']))} (got {value!r})"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise UsageError(f"{flag} must be a finite number (got {value})")
            if meta["minimum"] is not None and value < meta["minimum"]:
                raise UsageError(f"{flag} must be >= {meta['minimum']:g} (got {value})")
            if meta["above"] is not None and value <= meta["above"]:
                raise UsageError(f"{flag} must be > {meta['above']:g} (got {value})")
            if meta["maximum"] is not None and value > meta["maximum"]:
                raise UsageError(f"{flag} must be <= {meta['maximum']:g} (got {value})")
        if not self.env:
            raise UsageError("--env must name a gymnasium environment")
        if self.node_timeout <= self.sync_interval:
            # A node that stops early calls its meeting at once and waits for the others'.
            raise UsageError(
                f"--node-timeout ({self.node_timeout:g} s) must be longer than "
                f"--sync-interval ({self.sync_interval:g} s)"
            )
        if not self.noisy:
            for name, default in NOISE_SETTINGS.items():
                if getattr(self, name) != default:
                    raise UsageError(f"{_flag(name)} applies to NoisyNet models: add --noisy")
        return self

    @property
    def entropy_bonus(self) -> float:
        """The entropy coefficient in use: ent_coef where set, else 0.05, or 0 with NoisyNet.
        A trainer first fills ent_coef for the environment's spaces (`for_env`).

        The NoisyNet paper drops the bonus for NoisyNet-A3C: the learned noise explores.
        """
        if self.ent_coef is not None:
            return self.ent_coef
        return 0.0 if self.noisy else DEFAULT_ENT_COEF

    def for_env(self, continuous: bool, vector_observations: bool) -> TrainConfig:
        """This config with the defaults that depend on the environment's spaces filled in,
        so the run's config.toml and checkpoints record the values in use.

        `vector_observations`: flat Box observations (not frames, not one-hot states).
        """
        vector_discrete = vector_observations and not continuous
        changes: dict[str, Any] = {}
        if self.ent_coef is None and not self.noisy:
            if continuous:
                changes["ent_coef"] = CONTINUOUS_ENT_COEF
            elif vector_discrete:
                changes["ent_coef"] = VECTOR_ENT_COEF
            else:
                changes["ent_coef"] = DEFAULT_ENT_COEF
        if self.lr is None:
            changes["lr"] = VECTOR_LR if vector_discrete else DEFAULT_LR
        return dataclasses.replace(self, **changes)

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
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

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
            checked[name] = _coerce(value, hints[name], f"{source}: {name}")
        return dataclasses.replace(self, **checked)


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Accept a TOML/JSON value for a field of type `annotation`, or raise `UsageError`."""
    allowed = typing.get_args(annotation) or (annotation,)
    if value is None and type(None) in allowed:
        return None
    if bool in allowed:
        if isinstance(value, bool):
            return value
    elif int in allowed:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif float in allowed:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif str in allowed and isinstance(value, str):
        return value
    expected = " or ".join(t.__name__ for t in allowed if t is not type(None))
    raise UsageError(f"{where} must be {expected} (got {value!r})")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# ---------------------------------------------------------------------------- TOML files


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file, turning every failure into one `UsageError` line."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"config file is a folder: {path}") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path} is not valid TOML: {error}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read config file {path}: {error}") from None


def to_toml(config: TrainConfig) -> str:
    """The config as flat TOML; None (an unset option) is left out, as TOML has no null."""
    lines = []
    for name, value in config.to_dict().items():
        if value is None:
            continue
        lines.append(f"{name} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # finite: validate() refuses inf and nan
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# ------------------------------------------------------------------------------ presets


def preset_dirs() -> list[Path]:
    """Where shipped presets live: inside the wheel, or in the source checkout's configs/."""
    packaged = Path(str(resources.files("a3c"))) / "configs"
    checkout = Path(__file__).resolve().parent.parent / "configs"
    return [path for path in (packaged, checkout) if path.is_dir()]


# Presets for a whole family of environments, by the module gymnasium builds them from.
FAMILY_PRESETS = {"ale_py": "atari.toml", "gymnasium.envs.mujoco": "mujoco.toml"}


def find_preset(env_id: str, noisy: bool = False) -> Path | None:
    """The shipped preset whose `env` is `env_id` and whose `noisy` matches, else one for
    the env whatever its `noisy` (the flag then applies); else its family's (atari.toml for
    any Atari game, mujoco.toml for any MuJoCo task).
    """
    for_env = []
    for folder in preset_dirs():
        for path in sorted(folder.glob("*.toml")):
            values = load_toml(path)
            if values.get("env") == env_id:
                if bool(values.get("noisy", False)) == noisy:
                    return path
                for_env.append(path)
    if for_env:
        return for_env[0]
    from a3c.envs import entry_point  # imports gymnasium: only when no preset names the id

    module = entry_point(env_id)
    for prefix, name in FAMILY_PRESETS.items():
        if module.startswith(prefix):
            for folder in preset_dirs():
                if (folder / name).is_file():
                    return folder / name
    return None


# --------------------------------------------------------------------------- command line


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr and exit code 2, like every other bad input;
    `--version` on every command, with the versions a bug report needs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations: a flag shortened in a script would silently change meaning when
        # a new flag starts the same way.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--version",
            action=_PrintVersion,
            nargs=0,
            help="print the versions of a3c, torch, gymnasium, ale-py and Python, then exit",
        )

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _PrintVersion(argparse.Action):
    """argparse's own version action wraps the line at the terminal's width."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_line(parser.prog))
        parser.exit()


def version_line(prog: str) -> str:
    """Read from the installed packages' metadata, so --version imports none of them."""
    from importlib import metadata

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    python = ".".join(map(str, sys.version_info[:3]))
    return (
        f"{prog} {installed('a3c')} (torch {installed('torch')}, gymnasium "
        f"{installed('gymnasium')}, ale-py {installed('ale-py')}, Python {python})"
    )


def format_default(value: Any) -> str:
    """A default as --help and the README show it: 1,000,000 steps, 1e-8, on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, float):
        return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m[1].replace('+', '')}{m[2]}", f"{value:g}")
    return str(value)


# Flags of a3c-train that say where settings come from or how to show the run, rather than
# being settings: they never reach TrainConfig.
COMMAND_FLAGS = ("config", "no_preset", "resume", "quiet")


def build_parser(prog: str = "a3c-train") -> argparse.ArgumentParser:
    """One flag per `TrainConfig` field, grouped by topic, plus the command's own flags.

    Unset flags stay out of the namespace, so a preset's value is only overridden by a
    flag that was given.
    """
    parser = OneLineParser(
        prog=prog,
        description="Train an A3C agent with Hogwild workers. "
        "Settings come from the dataclass defaults, then a preset (--config FILE, or the "
        "shipped preset for --env), then the flags given here. "
        "Budgets and intervals count agent steps summed over all workers.",
        argument_default=argparse.SUPPRESS,
    )
    groups = {name: parser.add_argument_group(name) for name in GROUPS}
    defaults = TrainConfig()
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        kind = next(
            t for t in (typing.get_args(hints[f.name]) or (hints[f.name],)) if t is not type(None)
        )
        default = f.metadata["default_text"] or getattr(defaults, f.name)
        help_text = f.metadata["help"]
        if default is not None:
            help_text += f" (default: {format_default(default)})"
        group = groups[f.metadata["group"]]
        if kind is bool:
            group.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, help=help_text)
        else:
            group.add_argument(
                _flag(f.name),
                type=kind,
                choices=f.metadata["choices"],
                metavar=None if f.metadata["choices"] else f.name.upper(),
                help=help_text,
            )
    run = groups[RUN]
    run.add_argument(
        "--config", metavar="FILE", help="TOML file of settings (keys as the flags, with _)"
    )
    run.add_argument(
        "--no-preset",
        action="store_true",
        help="the built-in defaults and the flags only, even where configs/ has a preset "
        "(default: off)",
    )
    run.add_argument(
        "--resume",
        metavar="PATH",
        help="continue a checkpoint or a run folder's latest.pt; flags may change all "
        "but the model's shape",
    )
    run.add_argument("--quiet", action="store_true", help="no progress output (default: off)")
    return parser


# Settings that shape the model: a resumed run must keep the saved ones.
MODEL_SETTINGS = (
    "env",
    "hidden_size",
    "lstm",
    "frame_size",
    "conv_channels",
    "conv_activation",
    "normalize_obs",
    "scale_rewards",
    "noisy",
    "noise",
    "noisy_dense",
    "policy_std",
)


def resumed_config(saved: Mapping[str, Any], args: argparse.Namespace) -> TrainConfig:
    """The config a checkpoint was trained with, then the flags given now (a longer budget,
    more workers); flags that would change the model's shape are refused."""
    if getattr(args, "config", None) is not None or getattr(args, "no_preset", False):
        raise UsageError("--resume continues the saved settings; give changes as flags")
    config = TrainConfig.from_dict(saved, source="checkpoint config")
    flags = _settings(args)
    for name in MODEL_SETTINGS:
        if name in flags and flags[name] != getattr(config, name):
            raise UsageError(
                f"{_flag(name)} cannot change on --resume (the checkpoint has "
                f"{getattr(config, name)!r})"
            )
    return config.replace(flags, source="command line").validate()


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if k not in COMMAND_FLAGS}


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Path | None]:
    """Layer defaults, then the preset, then explicit flags; return the config and its preset."""
    flags = _settings(args)
    preset: Path | None = None
    no_preset = getattr(args, "no_preset", False)
    if getattr(args, "config", None) is not None:
        if no_preset:
            raise UsageError("--config and --no-preset contradict each other; give one")
        preset = Path(args.config)
    elif not no_preset:
        preset = find_preset(flags.get("env", TrainConfig.env), flags.get("noisy", False))
    config = TrainConfig()
    if preset is not None:
        config = config.replace(load_toml(preset), source=str(preset))
    return config.replace(flags, source="command line").validate(), preset
