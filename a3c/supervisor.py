"""Child processes: start, watch, restart, stop; and the signals that end a run early.

The supervisor owns every reference a starting child may still need. A child started from
the fork server unpickles its arguments after `Process.start` returns, so a lock the
parent dropped in between is gone (its semaphore unlinked) before the child opens it: a
worker's restart replaced its update lock while the evaluator, started a moment before,
still had the old one to open, and the evaluator died with FileNotFoundError. Replaced
locks are therefore kept until the run ends.
"""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing as mp
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from a3c.errors import TrainingDiverged, TrainingFailed
from a3c.metrics import ProcessFault, ProcessRestart
from a3c.reporting import Reporter, RunStatus
from a3c.sharing import MAIN_SLOT, Inbox, LocalInbox, SharedObjects, parent_alive

# How long children get to finish their current rollout before they are terminated.
JOIN_TIMEOUT_S = 10.0


def process_context() -> Any:
    """Children start from a fork server that has imported torch and gymnasium once.

    Like `spawn`, nothing of the main process's state (threads, locks) is inherited; unlike
    `spawn`, a child does not re-import torch. On 2 cores, 16 children are up in 3 s
    instead of 30 s (measured with a probe that imports torch and a3c.worker).
    """
    context = mp.get_context("forkserver")
    # torch.optim imports torch._dynamo (2.5 s here) on a process's first optimiser step;
    # importing it once in the server spares every worker that cost.
    context.set_forkserver_preload(["a3c.trainer", "torch._dynamo"])
    return context


def _name_process(name: str) -> None:
    """Show `name` for this process in top, ps -o comm and /proc/PID/comm (Linux only)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass


def child_main(name: str, shared: SharedObjects, body: Callable[..., None], *args: Any) -> None:
    """Run a child's `body(*args)`; a failure goes to the main process as text, then exit
    code 1."""
    # Ctrl-C reaches the whole process group; only the main process acts on it and tells
    # the children through the stop flag, so they end at a rollout boundary.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _name_process(name)
    try:
        body(*args)
    except BaseException as error:
        if not parent_alive():
            os._exit(1)  # a failed send to the dead main process, most likely: nobody to tell
        report = f"{name} failed:\n{traceback.format_exc()}"
        shared.messages.put(ProcessFault(name, report, fatal=isinstance(error, TrainingDiverged)))
        os._exit(1)


class Terminated(KeyboardInterrupt):
    """SIGTERM: shut down like Ctrl-C, exit with 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


class Signals:
    """Ctrl-C and SIGTERM during a run.

    With children, a signal is noted and raised by the main loop (`raise_if_signalled`),
    never inside a read of the children's pipes. Raised there, it left half a message in
    the pipe, and the shutdown's own drain unpickled the rest ("EOFError: Ran out of
    input") instead of saving the final checkpoint. A serial run raises at once.
    """

    def __init__(self) -> None:
        self.signalled: int | None = None

    def note(self, signum: int, frame: Any) -> None:
        self.signalled = signum

    def raise_if_signalled(self) -> None:
        if self.signalled == signal.SIGTERM:
            raise Terminated
        if self.signalled is not None:
            raise KeyboardInterrupt

    @contextmanager
    def handled(self, serial: bool) -> Iterator[None]:
        """Install the handlers for the run (from the main thread only); restore Python's
        after it."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGTERM, _raise_terminated if serial else self.note)
        if not serial:
            signal.signal(signal.SIGINT, self.note)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, signal.default_int_handler)

    @staticmethod
    def second_ends_everything(processes: Callable[[], list[Any]]) -> None:
        """After the first interrupt, a second Ctrl-C or SIGTERM kills the children and
        exits at once."""
        if threading.current_thread() is not threading.main_thread():
            return

        def exit_now(signum: int, frame: Any) -> None:
            for process in processes():
                if process.is_alive():
                    process.kill()
            os._exit(128 + signum)

        signal.signal(signal.SIGINT, exit_now)
        signal.signal(signal.SIGTERM, exit_now)


@dataclass
class Child:
    """One role among the children, and the process now filling it."""

    name: str
    target: Callable[..., None]
    args: Callable[[SharedObjects], tuple]  # the role's arguments, given its own shared view
    slot: int = MAIN_SLOT  # its slot in the counters; a worker's update lock is slot - 1
    process: Any = None
    finished: bool = False


class Supervisor:
    """Starts the run's children, drains their records into the reporter, restarts the
    ones that fail (up to --max-restarts in all), and stops them all at the end."""

    def __init__(
        self,
        shared: SharedObjects,
        inbox: Inbox | LocalInbox,
        context: Any,
        reporter: Reporter,
        status: RunStatus,
        max_restarts: int,
    ) -> None:
        self.shared = shared
        self.inbox = inbox
        self.context = context
        self.reporter = reporter
        self.status = status
        self.max_restarts = max_restarts
        self.children: list[Child] = []
        self.restarts = 0
        self.signals = Signals()
        # Locks replaced at restarts: a child started just before may still have to open one.
        self.retired_locks: list[Any] = []

    def add(self, child: Child) -> Child:
        self.children.append(child)
        return child

    def start(self, child: Child) -> None:
        """Start a fresh process for `child`'s role, with a new pipe, and after a failure a
        new update lock: the predecessor may have died holding its lock or half-way
        through a send."""
        assert isinstance(self.inbox, Inbox), "a serial run starts no children"
        outbox = self.inbox.outbox()
        locks = self.shared.update_locks
        if child.process is not None and locks and child.slot != MAIN_SLOT:
            self.retired_locks.append(locks[child.slot - 1])
            locks[child.slot - 1] = self.context.Lock()
        own = dataclasses.replace(self.shared, messages=outbox, slot=child.slot)
        process = self.context.Process(
            target=child.target, args=child.args(own), name=child.name, daemon=True
        )
        process.start()
        outbox.connection.close()
        child.process = process

    def start_all(self) -> None:
        for child in self.children:
            self.start(child)

    def drain(self, timeout: float) -> int:
        """Report the records the children sent, waiting up to `timeout` for the first;
        returns how many."""
        records = self.inbox.receive(timeout)
        for record in records:
            self.reporter.report(record)
        return len(records)

    def wait(self, timeout: float = 0.1) -> None:
        """One turn of a main loop: records, signals, and the children's health."""
        self.drain(timeout)
        self.signals.raise_if_signalled()
        self.supervise()

    def supervise(self) -> None:
        """Notice children that ended; restart failed ones, up to max_restarts in all."""
        if self.status.fatal is not None:
            raise TrainingFailed(self.status.fatal)
        for child in self.children:
            code = child.process.exitcode
            if child.finished or code is None:
                continue
            if code == 0:
                child.finished = True
                continue
            self.drain(timeout=0.2)  # its traceback, if it sent one
            if self.status.fatal is not None:
                raise TrainingFailed(self.status.fatal)
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            if self.restarts >= self.max_restarts or self.shared.stop.is_set():
                raise TrainingFailed(
                    f"{child.name} {how}, after {self.restarts} restarts "
                    f"(--max-restarts {self.max_restarts})"
                )
            self.restarts += 1
            message = f"{child.name} {how}; restarting it from the shared weights"
            self.reporter.report(ProcessRestart(message, self.restarts, self.max_restarts))
            self.start(child)

    def finished(self, *children: Child) -> bool:
        return all(child.finished for child in children)

    def alive(self, child: Child | None) -> bool:
        return child is not None and child.process is not None and child.process.is_alive()

    def processes(self) -> list[Any]:
        return [child.process for child in self.children if child.process is not None]

    def stop(self) -> None:
        """Join every child, draining records so none blocks on a full pipe; then kill."""
        processes = self.processes()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
            self.drain(timeout=0.05)
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join(timeout=1.0)
            if process.is_alive():
                process.kill()
                process.join()
        while self.drain(timeout=0):
            pass
        self.inbox.close()
        self.retired_locks.clear()


def stop_helper_processes() -> None:
    """Stop multiprocessing's fork server and resource tracker, and wait until they exit.

    Left alone, each notices only once this process has exited, so a3c-train returned while
    they were still in its process group (as unreaped zombies for about 1.2 s here):
    processes that torchrun or a job scheduler no longer tracks. Call it once training is
    over and every child has been joined.
    """
    import gc

    # The run's locks and queues unregister their semaphores as they are collected; the
    # tracker would report any still registered when it stops as leaked.
    gc.collect()
    # Private, but in every Python a3c supports (3.11 on): the only way to join them.
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]
    multiprocessing.resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]
