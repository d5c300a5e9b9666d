"""Settings as TOML files: the shipped presets in configs/ (and which one an environment id
gets), --config files, and the config.toml every run folder holds."""

from __future__ import annotations

import json
import math
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from a3c.config import TrainConfig
from a3c.errors import UsageError


def preset_dirs() -> list[Path]:
    """Where shipped presets live: inside the wheel, or in the source checkout's configs/."""
    packaged = Path(str(resources.files("a3c"))) / "configs"
    checkout = Path(__file__).resolve().parent.parent / "configs"
    return [path for path in (packaged, checkout) if path.is_dir()]


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
    from a3c.profile import family_of  # imports gymnasium: only when no preset names the id

    name = family_of(env_id).preset
    if name is None:
        return None
    return next((folder / name for folder in preset_dirs() if (folder / name).is_file()), None)


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


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(key)} = {_toml_value(item)}" for key, item in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return repr(value)
        return ("-inf" if value < 0 else "inf") if not math.isnan(value) else "nan"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    raise UsageError(f"cannot write {value!r} to TOML")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)
