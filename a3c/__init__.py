"""Hogwild multi-process A3C for PyTorch."""

from importlib import metadata

from a3c.config import TrainConfig
from a3c.errors import UsageError

__all__ = ["TrainConfig", "UsageError", "__version__"]

# pyproject.toml holds the version; the installed metadata carries it here.
__version__ = metadata.version("a3c")
