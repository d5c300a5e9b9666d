"""The supervisor's children: starts and restarts in quick succession, with a group's locks."""

from __future__ import annotations

import torch

from a3c.config import TrainConfig
from a3c.envs import describe_env
from a3c.metrics import ProcessFault
from a3c.reporting import Reporter, RunStatus
from a3c.sharing import MAIN_SLOT, Inbox, SharedObjects
from a3c.supervisor import Child, Supervisor, child_main, process_context

WORKERS = 4
ROUNDS = 15


def take_every_lock(shared: SharedObjects) -> None:
    for lock in shared.update_locks:
        with lock:
            pass


class Faults:
    def __init__(self) -> None:
        self.reports: list[str] = []

    def process_fault(self, record: ProcessFault) -> None:
        self.reports.append(record.report)


def test_children_restarted_one_after_another_all_start_with_their_locks() -> None:
    """Several machines: a worker's restart replaces its update lock. A child started a
    moment before (the evaluator) still had to open the old one; dropped at once, its
    semaphore was gone, and that child died on start with FileNotFoundError."""
    context = process_context()
    model = torch.nn.Linear(2, 2)
    shared = SharedObjects.create(
        model, torch.optim.SGD(model.parameters(), lr=0.1), describe_env("CartPole-v1"),
        None, WORKERS, context=context, update_locks=True,
    )  # fmt: skip
    status = RunStatus(TrainConfig(), None, shared.stop.set)
    faults = Faults()
    supervisor = Supervisor(shared, Inbox(context), context, Reporter(status, faults), status, 0)
    children = []
    for slot in range(MAIN_SLOT, MAIN_SLOT + 1 + WORKERS):
        name = f"child-{slot}"
        args = lambda own, name=name: (name, own, take_every_lock, own)  # noqa: E731
        children.append(supervisor.add(Child(name, child_main, args, slot=slot)))
    try:
        for _ in range(ROUNDS):
            for child in children:  # after the first round, each start is a restart
                supervisor.start(child)
            for child in children:
                child.process.join(timeout=60)
            supervisor.drain(timeout=0)
            assert [child.process.exitcode for child in children] == [0] * len(children)
        assert faults.reports == []
        assert len(supervisor.retired_locks) == (ROUNDS - 1) * WORKERS
    finally:
        supervisor.stop()
    assert supervisor.retired_locks == []
