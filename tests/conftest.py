"""Fixtures shared by the tests (the helpers behind them are in helpers.py)."""

from __future__ import annotations

import pytest
from helpers import Cli


@pytest.fixture
def cli() -> Cli:
    return Cli()
