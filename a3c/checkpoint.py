"""Checkpoints: plain dicts of tensors and Python values, written atomically, read safely."""

from __future__ import annotations

import os
import pickle
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from a3c.config import DEFAULT_ENT_COEF, TrainConfig
from a3c.errors import UsageError, first_line

# 2: conv encoders standardise each frame; format-1 conv weights expect frames in [0, 1].
FORMAT_VERSION = 2

# Settings added after checkpoints were first written, with the value that describes how
# the older checkpoints were trained (their model has no running statistics), whatever
# the default is now.
LEGACY_SETTINGS = {"normalize_obs": False, "scale_rewards": False}


def build_checkpoint(
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    config: TrainConfig,
    step: int,
    episodes: int,
    best_score: float | None,
    seconds: float,
) -> dict[str, Any]:
    """Everything needed to play or resume; tensors are cloned so later updates don't leak in."""
    import a3c

    return {
        "format_version": FORMAT_VERSION,
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": _clone(optimizer.state_dict()) if optimizer is not None else None,
        "config": config.to_dict(),
        "env": config.env,
        "step": int(step),
        "episodes": int(episodes),
        "best_score": None if best_score is None else float(best_score),
        "seconds": float(seconds),
        "versions": {
            "a3c": a3c.__version__,
            "torch": str(torch.__version__),
            "python": platform.python_version(),
        },
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _clone(value: Any) -> Any:
    if torch.is_tensor(value):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_clone(v) for v in value)
    return value


def save_checkpoint(checkpoint: dict[str, Any], path: Path) -> None:
    """Write to a temporary file in the same folder, fsync it, then rename over `path`.

    A reader sees the old file or the new one, never half of one, even after a crash.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            torch.save(checkpoint, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def resolve_checkpoint_path(path: str | Path, prefer: str = "best") -> Path:
    """A checkpoint file, or a run folder meaning its best.pt (to play) or latest.pt (to
    resume), falling back to the other."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"no such file or folder: {path}")
    if not path.is_dir():
        return path
    names = ["best.pt", "latest.pt"] if prefer == "best" else ["latest.pt", "best.pt"]
    for folder in (path / "checkpoints", path):
        for name in names:
            if (folder / name).is_file():
                return folder / name
    raise UsageError(f"no checkpoint in {path} (looked for checkpoints/{' and '.join(names)})")


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with torch's safe loader; every bad file is one `UsageError` line.

    ``weights_only=True`` refuses any pickle that would import or call code, so a crafted
    file is rejected before anything in it runs.
    """
    path = resolve_checkpoint_path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UsageError(
            f"{path} was refused by the safe loader: {_unpickler_reason(error)}"
        ) from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    except Exception as error:  # torch raises many kinds for a damaged file; all mean one thing
        raise UsageError(f"{path} is not a readable checkpoint ({first_line(error)})") from None
    if not isinstance(checkpoint, dict) or "format_version" not in checkpoint:
        raise UsageError(f"{path} is not an a3c checkpoint")
    version = checkpoint["format_version"]
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UsageError(
            f"{path} has checkpoint format {version}; this a3c reads up to {FORMAT_VERSION}, "
            "so upgrade a3c to read it"
        )
    missing = {"model", "config", "step"} - checkpoint.keys()
    if missing:
        raise UsageError(f"{path} is not a complete checkpoint (missing {', '.join(missing)})")
    if isinstance(checkpoint["config"], dict):
        saved = checkpoint["config"]
        for name, value in LEGACY_SETTINGS.items():
            saved.setdefault(name, value)
        if saved.get("ent_coef") is None and not saved.get("noisy", False):
            # Written before trainers filled every default in: no bonus chosen then meant
            # 0.05 for any discrete action space, whatever the default is now.
            saved["ent_coef"] = DEFAULT_ENT_COEF
    if version < 2 and _has_conv_weights(checkpoint["model"]):
        # Loading would work and the agent would play blind: refuse instead.
        raise UsageError(
            f"{path} holds image weights trained on frames scaled to [0, 1] (format {version}); "
            "this a3c standardises each frame, so train the agent again"
        )
    return checkpoint


def _has_conv_weights(weights: Any) -> bool:
    return isinstance(weights, dict) and any(
        torch.is_tensor(value) and value.dim() == 4 for value in weights.values()
    )


def _unpickler_reason(error: BaseException) -> str:
    """The one line of torch's long weights-only message that says what was refused."""
    for line in str(error).splitlines():
        if "WeightsUnpickler error:" in line:
            return line.split("WeightsUnpickler error:", 1)[1].strip().split(". ")[0]
    return first_line(error)
