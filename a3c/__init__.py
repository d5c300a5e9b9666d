"""Hogwild multi-process A3C for PyTorch."""

from a3c.config import TrainConfig
from a3c.errors import UsageError

__all__ = ["TrainConfig", "UsageError", "__version__"]

__version__ = "0.1.0"
