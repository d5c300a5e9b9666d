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
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from a3c.errors import UsageError


def _option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    default_factory: Any = dataclasses.MISSING,
    choices: tuple[str, ...] | tuple[int, ...] | None = None,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> Any:
    """A dataclass field with its help text and the range of values it accepts.

    ``minimum`` is inclusive, ``above`` exclusive; both are checked by `TrainConfig.validate`.
    """
    metadata = {
        "help": help,
        "choices": choices,
        "minimum": minimum,
        "above": above,
        "maximum": maximum,
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run. Budgets count agent steps, not emulator frames."""

    env: str = _option("CartPole-v1", help="gymnasium environment id")
    seed: int = _option(1, help="seed of worker 0; worker k uses seed + k", minimum=0)
    workers: int = _option(
        default_factory=_cpu_count,
        help="training processes, one per usable CPU core unless given; "
        "0 runs one worker inside the main process, for debugging",
        minimum=0,
    )
    total_steps: int = _option(
        1_000_000,
        help="training budget in agent steps summed over all workers "
        "(one Atari agent step is 4 emulator frames)",
        minimum=1,
    )
    t_max: int = _option(20, help="rollout length between two updates, in agent steps", minimum=1)
    envs_per_worker: int = _option(
        1,
        help="environments each worker steps in lockstep, one batched forward pass for all; "
        "an update then learns from t_max steps of each",
        minimum=1,
    )
    gamma: float = _option(0.99, help="discount factor", above=0.0, maximum=1.0)
    advantage: str = _option(
        "gae",
        help="advantage estimator: generalised advantage estimation or plain n-step returns",
        choices=("gae", "nstep"),
    )
    gae_lambda: float = _option(
        1.0, help="GAE lambda (1 equals the n-step advantage)", minimum=0.0, maximum=1.0
    )
    lr: float = _option(1e-4, help="learning rate of the shared optimiser", above=0.0)
    lr_decay: bool = _option(False, help="decay the learning rate linearly to 0 at total_steps")
    optimizer: str = _option(
        "adam",
        help="shared optimiser: Adam, or RMSprop with shared statistics as in the A3C paper",
        choices=("adam", "rmsprop"),
    )
    optimizer_eps: float = _option(1e-8, help="epsilon of Adam or RMSprop", above=0.0)
    rmsprop_alpha: float = _option(
        0.99, help="smoothing constant of RMSprop", above=0.0, maximum=1.0
    )
    ent_coef: float = _option(0.01, help="entropy bonus coefficient (beta)", minimum=0.0)
    vf_coef: float = _option(0.5, help="value loss coefficient", above=0.0)
    max_grad_norm: float = _option(40.0, help="clip each update's gradient norm to this", above=0.0)
    clip_rewards: bool = _option(
        False, help="learn from rewards clipped to [-1, 1]; logged scores stay unclipped"
    )
    lstm: bool = _option(True, help="LSTM actor-critic; --no-lstm gives the feed-forward A3C FF")
    frame_size: int = _option(
        42,
        help="Atari frames are resized to this square: 42 with the conv encoder of "
        "pytorch-a3c, 84 with the A3C paper's",
        choices=(42, 84),
    )
    conv_channels: int = _option(
        32,
        help="channels of each of the four convolutions on 42x42 frames (pytorch-a3c has 32); "
        "the 84x84 encoder keeps the A3C paper's",
        minimum=1,
    )
    life_loss_terminal: bool = _option(
        False,
        help="Atari: learn as if a lost life ended the episode; logged scores are whole games",
    )
    hidden_size: int = _option(128, help="width of the encoder output and the LSTM", minimum=1)
    eval_interval: int = _option(
        10_000, help="evaluate the shared weights every this many agent steps", minimum=1
    )
    eval_episodes: int = _option(10, help="episodes per evaluation", minimum=1)
    eval_max_steps: int = _option(
        10_000,
        help="cut an evaluation episode after this many agent steps, so a policy that stalls "
        "cannot hang the evaluator",
        minimum=1,
    )
    eval_policy: str = _option(
        "greedy",
        help="evaluation actions: the most probable one, or sampled from the policy",
        choices=("greedy", "sample"),
    )
    target_score: float | None = _option(
        None, help="stop training once an evaluation's mean score reaches this"
    )
    max_restarts: int = _option(
        3,
        help="restart a crashed worker or evaluator from the shared weights this many times "
        "in a run, then stop",
        minimum=0,
    )
    max_nonfinite_updates: int = _option(
        10,
        help="stop when a worker's last this many updates in a row had a non-finite loss or "
        "gradient (each one is skipped, never applied)",
        minimum=1,
    )
    checkpoint_interval: int = _option(
        100_000, help="write checkpoints/latest.pt every this many agent steps", minimum=1
    )
    run_dir: str = _option("runs", help="folder that receives one subfolder per run")

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
        return self

    @property
    def serial(self) -> bool:
        """True when the single worker runs inside the main process."""
        return self.workers == 0

    def learning_rate_at(self, step: int) -> float:
        """The learning rate after `step` agent steps: constant, or linear decay to 0."""
        if not self.lr_decay:
            return self.lr
        return self.lr * max(0.0, 1.0 - step / self.total_steps)

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


ATARI_PRESET = "atari.toml"


def find_preset(env_id: str) -> Path | None:
    """The shipped preset whose `env` is `env_id`; for other Atari games, atari.toml."""
    for folder in preset_dirs():
        for path in sorted(folder.glob("*.toml")):
            if load_toml(path).get("env") == env_id:
                return path
    from a3c.envs import is_atari  # imports gymnasium: only when no preset names the id

    if is_atari(env_id):
        for folder in preset_dirs():
            if (folder / ATARI_PRESET).is_file():
                return folder / ATARI_PRESET
    return None


# --------------------------------------------------------------------------- command line


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr and exit code 2, like every other bad input."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(prog: str = "a3c-train") -> argparse.ArgumentParser:
    """One flag per `TrainConfig` field, plus --config. Unset flags stay out of the namespace."""
    parser = OneLineParser(
        prog=prog,
        description="Train an A3C agent with Hogwild workers. "
        "Settings come from the dataclass defaults, then a preset (--config FILE, or the "
        "shipped preset for --env), then the flags given here.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--config", metavar="FILE", help="TOML file of settings (keys as the flags, with _)"
    )
    defaults = TrainConfig()
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        kind = next(
            t for t in (typing.get_args(hints[f.name]) or (hints[f.name],)) if t is not type(None)
        )
        default = getattr(defaults, f.name)
        help_text = f.metadata["help"] + ("" if default is None else f" (default: {default})")
        if kind is bool:
            parser.add_argument(
                _flag(f.name), action=argparse.BooleanOptionalAction, help=help_text
            )
        else:
            parser.add_argument(
                _flag(f.name),
                type=kind,
                choices=f.metadata["choices"],
                metavar=None if f.metadata["choices"] else f.name.upper(),
                help=help_text,
            )
    return parser


# Settings that shape the model: a resumed run must keep the saved ones.
MODEL_SETTINGS = ("env", "hidden_size", "lstm", "frame_size", "conv_channels")


def resumed_config(saved: Mapping[str, Any], args: argparse.Namespace) -> TrainConfig:
    """The config a checkpoint was trained with, then the flags given now (a longer budget,
    more workers); flags that would change the model's shape are refused."""
    if getattr(args, "config", None) is not None:
        raise UsageError("--resume continues the saved settings; give changes as flags")
    config = TrainConfig.from_dict(saved, source="checkpoint config")
    flags = {k: v for k, v in vars(args).items() if k != "config"}
    for name in MODEL_SETTINGS:
        if name in flags and flags[name] != getattr(config, name):
            raise UsageError(
                f"{_flag(name)} cannot change on --resume (the checkpoint has "
                f"{getattr(config, name)!r})"
            )
    return config.replace(flags, source="command line").validate()


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, Path | None]:
    """Layer defaults, then the preset, then explicit flags; return the config and its preset."""
    flags = {k: v for k, v in vars(args).items() if k != "config"}
    preset: Path | None = None
    if getattr(args, "config", None) is not None:
        preset = Path(args.config)
    else:
        preset = find_preset(flags.get("env", TrainConfig.env))
    config = TrainConfig()
    if preset is not None:
        config = config.replace(load_toml(preset), source=str(preset))
    return config.replace(flags, source="command line").validate(), preset
