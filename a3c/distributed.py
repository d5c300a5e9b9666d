"""Past one machine: Hogwild inside each node, `torch.distributed` between nodes.

Each node (one `a3c-train` process under `torchrun`) trains as on one machine: its own
workers, shared model and shared optimiser. Every `sync_interval` seconds the nodes meet:
each contributes how far its weights moved since the last meeting, one `all_reduce` sums
those changes, and every node continues from the last agreed weights plus `outer_lr` times
the mean change, bit for bit the same on every node. With `outer_lr` 1 (the default) that
is model averaging (parameter mixing, McDonald et al. 2010; local SGD, Lin et al. 2018),
with the optimiser's state kept on each node as DiLoCo does (Douillard et al. 2023, whose
outer step with learning rate 1 and no momentum is this mean); with the node count it is
the sum of the changes, as Hogwild applies every worker's update in full.
docs/distributed.md says what each costs.

A meeting holds every local worker's update lock, so no optimiser step is halfway through
a parameter while the meeting reads or writes it; the workers go on playing and computing
gradients meanwhile, and only their next optimiser step waits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from a3c.checkpoint import load_checkpoint
from a3c.config import TrainConfig
from a3c.errors import TrainingFailed, UsageError, first_line
from a3c.metrics import RunDirectory
from a3c.normalize import RunningMeanStd
from a3c.presets import to_toml
from a3c.sharing import MAIN_SLOT, SharedObjects


@dataclass(frozen=True)
class Node:
    """This process's place in the group, from the variables `torchrun` sets."""

    rank: int
    world_size: int
    run_id: str  # torchrun's --rdzv-id: the same for every node and every restart
    restarts: int  # how often this node's agent restarted it after a failure

    @classmethod
    def from_environment(cls) -> Node | None:
        """None unless started by `torchrun` (or with its variables) in a group of 2 or more."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size < 2:
            return None
        return cls(
            rank=int(os.environ["RANK"]),
            world_size=world_size,
            run_id=os.environ.get("TORCHELASTIC_RUN_ID", "none"),
            restarts=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        )

    @property
    def leader(self) -> bool:
        """Rank 0: the node that evaluates and writes checkpoints."""
        return self.rank == 0


@dataclass(frozen=True)
class Meeting:
    """What one meeting agreed, and what it cost this node."""

    number: int
    step: int  # agent steps of all nodes, counted up to this meeting
    local_steps: int  # this node's agent steps since the previous meeting
    stop: bool  # some node asked the group to stop
    seconds: float  # how long this node's workers could not step: the locks held
    bytes: int  # what this node sent into the collectives
    weights_hash: str  # sha256 of the agreed weights and statistics (its first 16 digits)
    nodes_agree: bool = False  # every node's hash equals this one (`NodeGroup.all_texts`)
    at: float = 0.0  # seconds since the run started


class Moments:
    """A `RunningMeanStd` as sums that add up across nodes: count, sum, sum of squares."""

    def __init__(self, stats: RunningMeanStd) -> None:
        self.stats = stats
        self.size = 1 + 2 * stats.mean.numel()  # count, then sums and sums of squares

    def read(self) -> torch.Tensor:
        count, mean, var = self.stats.count, self.stats.mean, self.stats.var
        return torch.cat([count.reshape(1), (count * mean).reshape(-1),
                          (count * (var + mean.square())).reshape(-1)])  # fmt: skip

    def write(self, moments: torch.Tensor) -> None:
        size = self.stats.mean.numel()
        count = moments[0]
        if count <= 0:
            return
        mean = (moments[1 : 1 + size] / count).reshape(self.stats.mean.shape)
        squares = (moments[1 + size :] / count).reshape(self.stats.var.shape)
        self.stats.count.copy_(count)
        self.stats.mean.copy_(mean)
        self.stats.var.copy_((squares - mean.square()).clamp_min(0.0))


def _store_of_this_start(node: Node, timeout: timedelta) -> dist.Store | None:
    """A store that holds nothing from before a restart; None where torch makes one anyway.

    torchrun's agent keeps one store for its whole life and hands it to every start of the
    workers as it is (TORCHELASTIC_USE_AGENT_STORE). After a restart, gloo would read the
    dead processes' addresses from it and fail with "Connection refused". So node 0 hosts a
    new store at every start and posts its port and a token on the agent's store; every
    other node waits until the posted port answers with the posted token, which a store
    of an earlier start cannot (its process has ended, or the port is someone else's).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    host = os.environ["MASTER_ADDR"]
    agent_store = dist.TCPStore(host, int(os.environ["MASTER_PORT"]), timeout=timeout)
    key = f"a3c/{node.run_id}/store"
    if node.leader:
        store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timeout)
        token = uuid.uuid4().hex
        store.set("token", token)
        agent_store.set(key, f"{store.port} {token}")
        return store
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        port, token = agent_store.get(key).decode().split()
        try:
            store = dist.TCPStore(host, int(port), timeout=timedelta(seconds=2))
            if store.get("token").decode() == token:
                store.set_timeout(timeout)
                return store
        except RuntimeError:  # refused, or no answer: a store of an earlier start
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"node 0's store at {host}:{port} did not answer")
        time.sleep(0.2)


class NodeGroup:
    """This node's side of the group: the start, the meetings and the end."""

    def __init__(self, node: Node, timeout_s: float, outer_lr: float = 1.0) -> None:
        self.node = node
        self.outer_lr = outer_lr
        timeout = timedelta(seconds=timeout_s)
        dist.init_process_group(
            "gloo",
            store=_store_of_this_start(node, timeout),
            rank=node.rank,
            world_size=node.world_size,
            timeout=timeout,
        )
        # A node that had not failed is restarted too, with its own count still 0.
        self.restarted = any(int(text) > 0 for text in self.all_texts(str(node.restarts)))
        self.meetings = 0
        self.agreed_steps = 0
        self.agreed = (torch.zeros(0), torch.zeros(0, dtype=torch.float64))

    @staticmethod
    def _parameters(model: torch.nn.Module) -> list[torch.Tensor]:
        return [parameter.data for parameter in model.parameters()]

    @staticmethod
    def _moments(model: torch.nn.Module) -> list[Moments]:
        return [Moments(module) for module in model.modules() if isinstance(module, RunningMeanStd)]

    def _read(self, model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        weights = torch.cat([tensor.reshape(-1) for tensor in self._parameters(model)])
        moments = [m.read() for m in self._moments(model)]
        return weights, torch.cat(moments) if moments else torch.zeros(0, dtype=torch.float64)

    def _write(self, model: torch.nn.Module, weights: torch.Tensor, moments: torch.Tensor) -> None:
        offset = 0
        for tensor in self._parameters(model):
            tensor.copy_(weights[offset : offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()
        offset = 0
        for statistics in self._moments(model):
            statistics.write(moments[offset : offset + statistics.size])
            offset += statistics.size

    def start(self, model: torch.nn.Module, step: int) -> int:
        """Every node takes the weights, statistics and step count of the node that has
        trained furthest (after a restart, the newest checkpoint; at first, node 0's).
        Returns the step."""
        steps = [int(text) for text in self.all_texts(str(step))]
        source = steps.index(max(steps))
        weights, moments = self._read(model)
        counter = torch.tensor([step], dtype=torch.int64)
        for tensor in (weights, moments, counter):
            dist.broadcast(tensor, src=source)
        self._write(model, weights, moments)
        self.agreed = (weights, moments)
        self.agreed_steps = int(counter.item())
        return self.agreed_steps

    def meet(
        self,
        shared: SharedObjects,
        stop: bool,
        worker_alive: Callable[[int], bool] | None = None,
    ) -> Meeting:
        """Combine this node's change since the last meeting with everyone's.

        This node's step counter holds the agreed count at the last meeting plus its own
        steps since; it leaves holding the new agreed count plus whatever the workers
        counted while the meeting ran.
        """
        model = shared.model
        steps_now = shared.steps_done
        local_steps = steps_now - self.agreed_steps
        counters = torch.tensor([local_steps, int(stop)], dtype=torch.int64)
        # First the counts, without the locks: it returns once every node has arrived, so
        # no worker waits on a lock for a node that is late.
        dist.all_reduce(counters)
        started = time.monotonic()
        with shared.updates_paused(worker_alive):
            weights, moments = self._read(model)
            base_weights, base_moments = self.agreed
            change = weights - base_weights
            moment_change = moments - base_moments
            dist.all_reduce(change)
            dist.all_reduce(moment_change)
            # Along the mean change: every node applied a full optimiser step per update, so
            # outer_lr 1 (the mean) moves as far as one node went, N (the sum) N times as far.
            weights = base_weights + change * self.outer_lr / self.node.world_size
            moments = base_moments + moment_change  # data seen anywhere counts once
            self._write(model, weights, moments)
            seconds = time.monotonic() - started
        self.agreed = (weights, moments)
        self.agreed_steps += int(counters[0])
        shared.step_counter.add(MAIN_SLOT, self.agreed_steps - steps_now)
        digest = hashlib.sha256(weights.numpy().tobytes() + moments.numpy().tobytes()).hexdigest()
        self.meetings += 1
        return Meeting(
            number=self.meetings,
            step=self.agreed_steps,
            local_steps=local_steps,
            stop=bool(counters[1]),
            weights_hash=digest[:16],
            seconds=seconds,
            bytes=sum(t.numel() * t.element_size() for t in (change, moment_change, counters)),
        )

    def all_texts(self, text: str) -> list[str]:
        """Every node's `text`, in rank order."""
        texts: list[Any] = [None] * self.node.world_size
        dist.all_gather_object(texts, text)
        return [str(t) for t in texts]

    def broadcast_text(self, text: str) -> str:
        """Rank 0's `text` on every node."""
        box = [text]
        dist.broadcast_object_list(box, src=0)
        return str(box[0])

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class Alone:
    """A run on one machine: what a trainer asks of the group, answered for a group of one."""

    node: Node | None = None
    evaluates = True  # this node plays the evaluations and keeps best.pt
    first_rank = 0  # the rank (and seed offset) of this node's first worker
    update_locks = False  # its workers lock their updates against meetings

    def run_directory(self, config: TrainConfig, resume_from: Path | None) -> RunDirectory:
        return RunDirectory.continue_or_create(config, resume_from)

    def resume_point(
        self, run_dir: RunDirectory, resume: dict[str, Any] | None, say: Callable[[str], object]
    ) -> dict[str, Any] | None:
        return resume

    def start(self, model: torch.nn.Module, step: int) -> int:
        return step

    def attach(
        self,
        shared: SharedObjects,
        run_dir: RunDirectory,
        start_time: float,
        worker_alive: Callable[[int], bool],
    ) -> None:
        pass

    def meet_if_due(self) -> None:
        pass

    def leave(self) -> None:
        pass

    def close(self) -> None:
        pass


class GroupRun(Alone):
    """This node's part in a run of several: joining, the run folders, the meetings every
    `sync_interval` seconds, and the last meetings that end the run on one set of weights."""

    update_locks = True

    def __init__(self, node: Node, config: TrainConfig, resume: dict[str, Any] | None) -> None:
        """Join the other nodes; every node must have been given the same settings."""
        if config.serial:
            raise UsageError("several machines need --workers 1 or more on every node")
        if resume is not None:
            raise UsageError(
                "--resume is for one machine; a group started by torchrun --max-restarts "
                "resumes from its latest checkpoint by itself (docs/distributed.md)"
            )
        self.node = node
        self.config = config
        self.evaluates = node.leader  # of several nodes, node 0 alone evaluates
        self.first_rank = node.rank * config.workers  # ranks run on across nodes
        self.group = NodeGroup(node, config.node_timeout, config.outer_lr)
        settings = self.group.all_texts(to_toml(config))
        differing = [rank for rank, text in enumerate(settings) if text != settings[0]]
        if differing:
            self.group.close()
            raise UsageError(
                f"nodes {differing} were given other settings than node 0; "
                "give every node the same a3c-train flags"
            )
        self.stopped = False  # the group agreed to stop
        self.left = False  # this node is out of the group: its last meeting is behind it
        self.last_meeting = time.monotonic()

    def run_directory(self, config: TrainConfig, resume_from: Path | None) -> RunDirectory:
        """Node 0's run folder is the run's; node n writes `<its name>-node<n>` beside it.

        A group that torchrun restarted goes on in the folders of its first start, found by
        torchrun's run id (each node's is named after node 0's, so found on any machine).
        """
        node, restarted = self.node, self.group.restarted
        assert node is not None
        name = ""
        if node.leader:
            earlier = RunDirectory.of_group(config, node.run_id) if restarted else None
            leader = earlier or RunDirectory.create(config, group_id=node.run_id)
            name = leader.path.name
        name = self.group.broadcast_text(name)
        if node.leader:
            return leader
        own = Path(config.run_dir) / f"{name}-node{node.rank}"
        if restarted and own.is_dir():
            return RunDirectory.reopen(config, own)
        return RunDirectory.named(config, own.name, group_id=node.run_id)

    def resume_point(
        self, run_dir: RunDirectory, resume: dict[str, Any] | None, say: Callable[[str], object]
    ) -> dict[str, Any] | None:
        """After a torchrun restart, this node's latest.pt from before it, if it wrote one;
        the group then starts from whichever node's has the most steps (`start`)."""
        latest = run_dir.latest_checkpoint
        if not self.group.restarted or not latest.is_file():
            return None
        checkpoint = load_checkpoint(latest)
        say(f"a3c: restarted by torchrun; this node has {latest} at step {checkpoint['step']:,}")
        return checkpoint

    def start(self, model: torch.nn.Module, step: int) -> int:
        return self.group.start(model, step)

    def attach(
        self,
        shared: SharedObjects,
        run_dir: RunDirectory,
        start_time: float,
        worker_alive: Callable[[int], bool],
    ) -> None:
        """What the meetings need: the shared model, the log, the run's clock, and which
        local workers are alive (a dead one's lock is passed over)."""
        self.shared, self.start_time, self.worker_alive = shared, start_time, worker_alive
        self.log = run_dir.open_log("meetings.csv", Meeting)
        self.last_meeting = time.monotonic()

    def _meet(self, stop: bool) -> Meeting:
        """One meeting of the nodes; a node that cannot reach the others ends the run."""
        try:
            meeting = self.group.meet(self.shared, stop, self.worker_alive)
            hashes = self.group.all_texts(meeting.weights_hash)
        except RuntimeError as error:  # gloo: a node died, hung past node_timeout, or left
            self.left = True
            raise TrainingFailed(
                f"node {self.group.node.rank} lost the other nodes at meeting "
                f"{self.group.meetings + 1}: {first_line(error)}"
            ) from None
        meeting = dataclasses.replace(
            meeting,
            nodes_agree=len(set(hashes)) == 1,
            at=round(time.time() - self.start_time, 3),
        )
        self.log.write(meeting)
        self.last_meeting = time.monotonic()
        if meeting.stop:
            self.stopped = True
            if meeting.step < self.config.total_steps:
                # A node was interrupted or failed. When the budget is spent instead, this
                # node's counter has passed it too and its workers end their last rollouts,
                # while node 0's evaluator goes on to the final evaluation.
                self.shared.stop.set()
        return meeting

    def meet_if_due(self) -> None:
        due = time.monotonic() - self.last_meeting >= self.config.sync_interval
        if not self.stopped and due:
            self._meet(stop=False)

    def leave(self) -> None:
        """The last meetings, once this node's workers have stopped: one that tells the
        others to stop (unless the group already agreed to), then one that counts every
        node's last steps, so all end on the same weights and the same total."""
        if self.left:
            return
        self.left = True
        if not self.stopped:
            self._meet(stop=True)
        self._meet(stop=True)

    def close(self) -> None:
        self.group.close()


def join_group(config: TrainConfig, resume: dict[str, Any] | None) -> Alone | GroupRun:
    """This run's group: under torchrun with 2 or more nodes, join it; else a group of one."""
    node = Node.from_environment()
    return Alone() if node is None else GroupRun(node, config, resume)
