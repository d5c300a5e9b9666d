"""Hogwild multi-process A3C for PyTorch.

`train`, `evaluate` and `load_agent` are what the commands call (docs/python.md); they are
imported on first use, so `import a3c` stays light.
"""

from importlib import import_module, metadata
from typing import Any

from a3c.config import TrainConfig
from a3c.errors import TrainingFailed, UsageError

__all__ = [
    "TrainConfig",
    "TrainingFailed",
    "UsageError",
    "__version__",
    "evaluate",
    "load_agent",
    "train",
]

# pyproject.toml holds the version; the installed metadata carries it here.
__version__ = metadata.version("a3c")

_LAZY = {
    "train": ("a3c.api", "train"),
    "evaluate": ("a3c.evaluator", "evaluate_checkpoint"),
    "load_agent": ("a3c.agent", "load_agent"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'a3c' has no attribute {name!r}")
