"""Small helpers the end-to-end tests share."""

from __future__ import annotations

import csv
from pathlib import Path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as file:
        return list(csv.DictReader(file))


def only_run(parent: Path) -> Path:
    """The one run folder a command created under `parent`."""
    (run,) = list(parent.iterdir())
    return run
