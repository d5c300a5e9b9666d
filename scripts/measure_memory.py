"""Memory of a running training: RSS and PSS of the main process and of every child.

Starts the real `a3c-train`, samples /proc while it runs, then stops it with SIGTERM (which
a3c-train handles like Ctrl-C, and which a shell's background job cannot have ignored, as
it can SIGINT) and prints the last sample and the growth since the first minute:

    python scripts/measure_memory.py --seconds 120 -- --env PongNoFrameskip-v4 --workers 16

RSS counts every page a process touches, the shared model and the libraries it shares
with its siblings included; PSS divides shared pages among the processes sharing them,
so the PSS figures add up to the memory the run really takes.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _kib(path: Path, field: str) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def descendants(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        direct = [int(c) for c in children.read_text().split()]
    except OSError:
        return []
    return direct + [d for c in direct for d in descendants(c)]


def rss_and_pss_kib(pid: int) -> tuple[int, int]:
    """One process's resident and proportional set sizes; OSError once it has gone."""
    proc = Path(f"/proc/{pid}")
    return _kib(proc / "status", "VmRSS"), _kib(proc / "smaps_rollup", "Pss")


def sample(main_pid: int) -> dict[str, tuple[int, int]]:
    """name -> (RSS KiB, PSS KiB) for the main process and every descendant."""
    result = {}
    for pid in [main_pid, *descendants(main_pid)]:
        proc = Path(f"/proc/{pid}")
        try:
            name = (proc / "comm").read_text().strip()
            if pid == main_pid:
                name = "main"
            elif name.startswith("python") and "forkserver" in (proc / "cmdline").read_text():
                name = "fork server"
            elif name.startswith("python"):
                name = "resource tracker"
            memory = rss_and_pss_kib(pid)
        except OSError:
            continue
        result[f"{name} ({pid})" if name in result else name] = memory
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("train_args", nargs="*", help="a3c-train flags, after --")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as run_root:
        command = [str(Path(sys.executable).parent / "a3c-train"), "--quiet",
                   "--run-dir", run_root, *args.train_args]  # fmt: skip
        process = subprocess.Popen(command)
        started = time.monotonic()
        first_minute: dict[str, tuple[int, int]] | None = None
        last: dict[str, tuple[int, int]] = {}
        while time.monotonic() - started < args.seconds and process.poll() is None:
            time.sleep(args.interval)
            last = sample(process.pid) or last
            if first_minute is None and time.monotonic() - started >= 60:
                first_minute = last
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        from a3c.checkpoint import load_checkpoint

        latest = next(Path(run_root).glob("*/checkpoints/latest.pt"))
        steps = load_checkpoint(latest)["step"]

    seconds = time.monotonic() - started
    print(f"a3c-train {' '.join(args.train_args)}: {steps:,} agent steps in {seconds:.0f} s, "
          f"exit code {process.returncode}")  # fmt: skip
    print(f"{'process':<28} {'RSS MiB':>8} {'PSS MiB':>8} {'RSS growth after 1 min':>24}")
    for name, (rss, pss) in sorted(last.items()):
        growth = ""
        if first_minute and name in first_minute and first_minute[name][0]:
            growth = f"{100 * (rss - first_minute[name][0]) / first_minute[name][0]:+.1f} %"
        print(f"{name:<28} {rss / 1024:8.1f} {pss / 1024:8.1f} {growth:>24}")
    total_pss = sum(pss for _, pss in last.values())
    print(f"{'all processes (PSS sum)':<28} {'':>8} {total_pss / 1024:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
