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


def hide_packages(folder: Path, *names: str) -> str:
    """A PYTHONPATH whose site hook makes `names` look uninstalled to a command."""
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {names!r}:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
    )
    return str(folder)
