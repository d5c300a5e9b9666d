"""What a setting is: its topic, help text, range and tags, and how a TOML or command-line
value becomes one of its type. `TrainConfig` (a3c/config.py) is built of these fields."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import field
from typing import Any

from a3c.errors import UsageError

# The topics of `a3c-train --help` and of docs/options.md's table, in their order.
ENVIRONMENT = "environment"
ROLLOUT = "rollout, returns and loss"
OPTIMISER = "optimiser"
MODEL = "model"
EVALUATION = "evaluation"
RUN = "checkpoints and run"
NODES = "several machines (under torchrun)"
GROUPS = (ENVIRONMENT, ROLLOUT, OPTIMISER, MODEL, EVALUATION, RUN, NODES)


def option(
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
    model: bool = False,
    noisy_only: bool = False,
) -> Any:
    """A dataclass field with its topic, help text and the range of values it accepts.

    ``minimum`` is inclusive, ``above`` exclusive; both are checked by `TrainConfig.validate`.
    ``default_text`` describes a default that depends on the machine. ``model``: the
    setting shapes the model, so a resumed run keeps the saved value. ``noisy_only``: it
    means something with --noisy only, and without it must keep its default.
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
        "model": model,
        "noisy_only": noisy_only,
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def coerce(value: Any, annotation: Any, where: str) -> Any:
    """Accept a TOML/JSON value for a field of type `annotation`, or raise `UsageError`."""
    origin = typing.get_origin(annotation)
    if origin is dict:
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            return dict(value)
        raise UsageError(f"{where} must be a table of KEY = VALUE (got {value!r})")
    if origin is list:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return list(value)
        raise UsageError(f"{where} must be a list of strings (got {value!r})")
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


def flag(name: str) -> str:
    """The command-line flag of a setting."""
    return "--" + name.replace("_", "-")
