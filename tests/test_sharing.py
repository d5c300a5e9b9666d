"""The primitives the processes share (a3c/sharing.py), with real processes and SIGKILL.

This module imports neither torch nor a3c.worker: every child it starts imports it first,
and twenty children each importing torch took 25 s more.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time
from pathlib import Path

from a3c.sharing import Flag, Inbox, LocalInbox, LockWithParent, Outbox, ParentGone, SlotCounter

# Big enough that a send takes many writes into the pipe, so a kill often cuts one short.
PAYLOAD = b"x" * 200_000


def _busy(slot: int, steps: SlotCounter, stop: Flag, outbox: Outbox) -> None:
    """What a child does all the time, as fast as it can: count, read the flag, send."""
    while not stop.is_set():
        steps.add(slot, 1)
        outbox.put((slot, PAYLOAD if steps.slots[slot] % 2 else b""))


def _wait_for(condition, seconds: float, inbox: Inbox, received: list) -> bool:
    """Receive until `condition()`; records are kept as (slot, size), not their bytes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        received.extend((slot, len(payload)) for slot, payload in inbox.receive(0.01))
        if condition():
            return True
    return False


def test_children_killed_at_any_moment_never_stall_the_others() -> None:
    """Twenty children killed by SIGKILL at random moments of that loop; after each, the
    steady child still counts and its records still arrive. With a lock shared by all
    children (multiprocessing.Value's, Event's, Queue's), a kill inside one stalls the
    rest for good."""
    context = mp.get_context("forkserver")
    steps, stop, inbox = SlotCounter(context, 3), Flag(context), Inbox(context)

    def start(slot: int) -> mp.process.BaseProcess:
        outbox = inbox.outbox()
        process = context.Process(target=_busy, args=(slot, steps, stop, outbox), daemon=True)
        process.start()
        outbox.connection.close()
        return process

    rng = random.Random(0)
    received: list = []
    steady = start(1)
    try:
        for _ in range(20):
            victim = start(2)
            assert _wait_for(lambda: steps.slots[2] > 0, 30, inbox, received), "no start"
            time.sleep(rng.uniform(0.0, 0.02))
            os.kill(victim.pid, signal.SIGKILL)
            victim.join()
            steps.slots[2] = 0
            counted, records = steps.slots[1], len(received)
            assert _wait_for(
                lambda counted=counted, records=records: (
                    steps.slots[1] > counted + 10
                    and sum(1 for slot, _ in received[records:] if slot == 1) > 10
                ),
                10,
                inbox,
                received,
            ), "the steady child stalled after a kill"
        # Every dead child's pipe is dropped once read to its end (a cut message included).
        assert _wait_for(lambda: len(inbox.readers) == 1, 10, inbox, received)
        assert {size for _, size in received} == {0, len(PAYLOAD)}
    finally:
        stop.set()  # the steady child may wait in a send until its pipe is read
        _wait_for(lambda: not steady.is_alive(), 10, inbox, [])
        if steady.is_alive():
            steady.kill()
        steady.join()
    assert steady.exitcode == 0
    inbox.close()


def test_counter_total_is_the_sum_of_its_slots() -> None:
    counter = SlotCounter(mp, 3, start=100)
    assert counter.add(1, 5) == 105
    assert counter.add(2, 7) == 112
    assert counter.add(0, -2) == 110
    assert list(counter.slots) == [98, 5, 7]


def test_a_child_that_exits_leaves_every_record_it_sent() -> None:
    context = mp.get_context("forkserver")
    inbox = Inbox(context)
    outbox = inbox.outbox()
    process = context.Process(target=_send_and_exit, args=(outbox, 500), daemon=True)
    process.start()
    outbox.connection.close()
    received: list = []
    assert _wait_for(lambda: not inbox.readers, 30, inbox, received)
    process.join()
    assert received == [(1, number) for number in range(500)]


def _send_and_exit(outbox: Outbox, count: int) -> None:
    for number in range(count):
        outbox.put((1, b"x" * number))


def test_local_inbox_hands_over_records_in_order() -> None:
    inbox = LocalInbox()
    for number in range(3):
        inbox.put(number)
    assert inbox.receive() == [0, 1, 2]
    assert inbox.receive() == []


def _wait_for_lock(lock, result: Path) -> None:
    result.write_text("waiting")
    try:
        with LockWithParent(lock):
            result.write_text("acquired")
    except ParentGone:
        result.write_text("parent gone")


def _hold_a_lock_under_a_child(result: Path) -> None:
    lock = mp.get_context("fork").Lock()
    lock.acquire()
    mp.get_context("fork").Process(target=_wait_for_lock, args=(lock, result)).start()
    time.sleep(60)


def test_a_child_stops_waiting_for_a_lock_its_dead_parent_held(tmp_path: Path) -> None:
    """Several machines: the main process, killed in a meeting, dies holding the workers'
    update locks; a worker must not wait for them forever."""
    result = tmp_path / "result"
    parent = mp.get_context("forkserver").Process(target=_hold_a_lock_under_a_child, args=(result,))
    parent.start()
    deadline = time.monotonic() + 30
    while not (result.exists() and result.read_text() == "waiting"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(parent.pid, signal.SIGKILL)
    parent.join()
    while result.read_text() == "waiting":
        assert time.monotonic() < deadline, "the child still waits for the dead parent's lock"
        time.sleep(0.05)
    assert result.read_text() == "parent gone"
