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


def process_group(pgid: int) -> list[str]:
    """`PID state` of every process in group `pgid`, zombies included: a child that has
    exited but that nobody has reaped yet still belongs to the group."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which may hold spaces: state, ppid, pgrp, ...
        state, _, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid:
            members.append(f"{entry.name} {state}")
    return members
