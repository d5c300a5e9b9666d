"""What the main process and its children share, with no lock that two children take.

A child can die at any instruction: the kernel's OOM killer, a `kill -9`, a crash in
native code. A multiprocessing lock it held then stays held for good, and every other
process that takes it waits forever: the run stops making progress while its processes
stay alive. The step counter (`multiprocessing.Value`), the stop event (`Event`), the
record queue (`Queue`) and the running statistics each had a lock that every child took,
and a CI run of the test that kills a worker and expects it restarted never finished.

So each primitive here has one writer per piece of memory or pipe: a counter is one slot
per process, summed; the stop flag is written by the main process alone; records travel
through one pipe per child. A child that dies mid-write leaves a stale slot or a cut
message in its own pipe, which the main process drops.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import multiprocessing as mp
import multiprocessing.connection
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch

    from a3c.model import ActorCritic
    from a3c.profile import EnvProfile

# The main process's slot in every counter: what a resumed run starts from, the steps a
# meeting of several machines agreed on, and a serial run's own counts.
MAIN_SLOT = 0
RECORDS_PER_READ = 1000


def parent_alive() -> bool:
    """False once the process that started this one has died, however it died."""
    parent = mp.parent_process()
    return parent is None or parent.is_alive()


def acquire_unless_dead(lock: Any, other_alive: Callable[[], bool]) -> bool:
    """Take `lock`, which one other process takes too; False, without it, once that
    process has died (it may have died holding it)."""
    while not lock.acquire(timeout=0.2):
        if not other_alive():
            return False
    return True


class ParentGone(Exception):
    """The main process died while this child waited for a lock it shares with it."""


class LockWithParent:
    """A lock a child shares with the main process alone (several machines: a worker's
    update lock). The main process may die holding it; a child waiting for it then
    raises ParentGone instead of waiting forever (its pipes to a test or a job scheduler
    open all the while)."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        if not acquire_unless_dead(self.lock, parent_alive):
            raise ParentGone

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


class SlotCounter:
    """A count that several processes add to without a lock: each adds to its own slot
    (an aligned 64-bit word: a reader sees its old or new value, never a mix) and the
    count is the sum of the slots."""

    def __init__(self, context: Any, slots: int, start: int = 0) -> None:
        self.slots = context.RawArray("q", slots)
        self.slots[MAIN_SLOT] = start

    def add(self, slot: int, amount: int) -> int:
        """Add `amount` to `slot`, which only this process writes; returns the new total."""
        self.slots[slot] += amount
        return self.total

    @property
    def total(self) -> int:
        return sum(self.slots)


class Flag:
    """Set by the main process, read by the children at their loop boundaries.

    `multiprocessing.Event.is_set` takes a lock shared by every process, and its `set`
    waits for every process that sleeps in `wait` to wake, a dead one included. A read
    of this flag takes nothing, and nobody sleeps on it.
    """

    def __init__(self, context: Any) -> None:
        self.flag = context.RawValue("b", 0)

    def set(self) -> None:
        self.flag.value = 1

    def is_set(self) -> bool:
        return bool(self.flag.value)


class Outbox:
    """A child's end of its pipe to the main process.

    A send writes straight into the pipe: nothing is left in a buffer when the child
    exits, and no feeder thread or lock is shared with another child. A send waits only
    while the pipe is full (64 KiB of records the main process has not read yet).
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def put(self, record: Any) -> None:
        self.connection.send(record)


class Inbox:
    """The main process's ends of the children's pipes."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.readers: list[Connection] = []

    def outbox(self) -> Outbox:
        """A new pipe, as the child's Outbox. The main process must close the Outbox's
        connection once the child has started (else the pipe never reports its end)."""
        reader, writer = self.context.Pipe(duplex=False)
        self.readers.append(reader)
        return Outbox(writer)

    def receive(self, timeout: float) -> list[Any]:
        """The records the pipes hold, waiting up to `timeout` for the first; at most
        RECORDS_PER_READ from each pipe, so a child that sends without pause cannot keep
        the main process reading.

        A pipe whose child has exited is read to its end, then closed. A child killed in
        the middle of a send leaves a cut message: its pipe is closed without it.
        """
        records: list[Any] = []
        for reader in self._ready(timeout):
            for _ in range(RECORDS_PER_READ):
                try:
                    records.append(reader.recv())
                except (EOFError, OSError):
                    reader.close()
                    self.readers.remove(reader)
                    break
                if not reader.poll():
                    break
        return records

    def _ready(self, timeout: float) -> list[Connection]:
        return cast(list[Connection], multiprocessing.connection.wait(self.readers, timeout))

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        self.readers.clear()


class LocalInbox:
    """A serial run's records: its worker and evaluator run in the main process."""

    def __init__(self) -> None:
        self.records: collections.deque[Any] = collections.deque()

    def put(self, record: Any) -> None:
        self.records.append(record)

    def receive(self, timeout: float = 0) -> list[Any]:
        records = list(self.records)
        self.records.clear()
        return records

    def close(self) -> None:
        pass


@dataclass
class SharedObjects:
    """What the main process shares with every child process (none of it is a lock that
    two children take, so a child killed anywhere cannot stall the rest)."""

    model: ActorCritic
    optimizer: torch.optim.Optimizer
    profile: EnvProfile  # the environment, profiled once by the main process
    step_counter: SlotCounter  # agent steps done by all workers
    episode_counter: SlotCounter  # training episodes finished
    stop: Flag  # set to make every child stop at its next boundary
    messages: Any  # where this process's EpisodeRecord / EvalRecord / ... go: `put(record)`
    # This process's slot in the counters: MAIN_SLOT in the main process (and in a serial
    # run's worker), 1 + its local index in a worker.
    slot: int = MAIN_SLOT
    # Several machines only: one lock per local worker, held around its optimiser step and
    # statistics merge, so a meeting of the nodes (holding them all) never reads or writes
    # a half-stepped parameter. Only that worker and the main process take it, and a
    # restarted worker gets a new one.
    update_locks: list[Any] = dataclasses.field(default_factory=list)

    @classmethod
    def create(
        cls,
        model: ActorCritic,
        optimizer: torch.optim.Optimizer,
        profile: EnvProfile,
        messages: Any,
        workers: int,
        *,
        context: Any = mp,
        steps: int = 0,
        episodes: int = 0,
        update_locks: bool = False,
    ) -> SharedObjects:
        slots = 1 + workers
        return cls(
            model=model,
            optimizer=optimizer,
            profile=profile,
            step_counter=SlotCounter(context, slots, steps),
            episode_counter=SlotCounter(context, slots, episodes),
            stop=Flag(context),
            messages=messages,
            update_locks=[context.Lock() for _ in range(workers)] if update_locks else [],
        )

    def add_steps(self, steps: int) -> int:
        """Count a rollout's steps in the global counter; return the new total."""
        return self.step_counter.add(self.slot, steps)

    @contextlib.contextmanager
    def updates_paused(self, worker_alive: Callable[[int], bool] | None = None) -> Iterator[None]:
        """No optimiser step or statistics merge runs inside: it holds every update lock
        (several machines only; on one machine there are none and this waits for nothing).

        The lock of a worker that `worker_alive(index)` says has died is passed over: it
        may have died holding it, and it steps nothing more (its restart gets a new lock).
        """
        held = []
        try:
            for index, lock in enumerate(self.update_locks):
                alive = functools.partial(worker_alive or (lambda _: True), index)
                if acquire_unless_dead(lock, alive):
                    held.append(lock)
            yield
        finally:
            for lock in held:
                lock.release()

    def add_episode(self) -> None:
        self.episode_counter.add(self.slot, 1)

    @property
    def steps_done(self) -> int:
        return self.step_counter.total

    @property
    def episodes_done(self) -> int:
        return self.episode_counter.total


# One machine: updates take no lock (Hogwild); `update_locks` serve several machines.
NO_LOCK = contextlib.nullcontext()
