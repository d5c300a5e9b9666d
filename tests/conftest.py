"""Helpers shared by the tests: run the real console commands and look for stray processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def leftover_processes(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries `marker` (children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if f"A3C_TEST_MARKER={marker}".encode() in environ and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


def process_named(marker: str, name: str) -> int | None:
    """PID of the live process carrying `marker` whose /proc comm is `name`."""
    for pid in leftover_processes(marker):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                return pid
        except OSError:
            continue
    return None


class Cli:
    """Runs a3c-train / a3c-eval in a subprocess tagged with a unique marker."""

    def __init__(self) -> None:
        self.marker = uuid.uuid4().hex
        self.env = {**os.environ, "A3C_TEST_MARKER": self.marker, "PYTHONUNBUFFERED": "1"}

    def run(
        self, command: str, *args: str, timeout: float = 300, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / command), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=cwd,
        )

    def start(self, command: str, *args: str, own_group: bool = False) -> subprocess.Popen[str]:
        """Start a command without waiting; its output is captured. With `own_group`, it
        leads a new process group (and session) that holds every process it starts."""
        return subprocess.Popen(
            [str(BIN / command), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=own_group,
        )

    def leftovers(self) -> list[int]:
        return leftover_processes(self.marker)

    def wait_for_no_leftovers(self, seconds: float = 10.0) -> list[int]:
        deadline = time.monotonic() + seconds
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def wait_for_process(self, name: str, seconds: float = 60.0) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pid = process_named(self.marker, name)
            if pid is not None:
                return pid
            time.sleep(0.2)
        raise AssertionError(f"no process named {name} appeared within {seconds} s")


@pytest.fixture
def cli() -> Cli:
    return Cli()
