"""Orchestration: shared objects, child processes, progress, checkpoints and shutdown."""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import importlib.util
import math
import multiprocessing as mp
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from a3c.checkpoint import build_checkpoint, load_checkpoint, save_checkpoint
from a3c.config import TrainConfig, to_toml
from a3c.distributed import Meeting, Node, NodeGroup
from a3c.envs import atari_path, describe_env
from a3c.errors import UsageError
from a3c.evaluator import Evaluator, run_evaluator
from a3c.metrics import (
    EpisodeRecord,
    EvalRecord,
    LossStats,
    ProcessFault,
    RunDirectory,
    SkippedUpdate,
    TensorBoardLog,
)
from a3c.model import ConvEncoder, build_model
from a3c.optim import make_shared_optimizer
from a3c.sharing import MAIN_SLOT, Flag, Inbox, LocalInbox, parent_alive
from a3c.worker import SharedObjects, TrainingDiverged, Worker, run_worker

# How long children get to finish their current rollout before they are terminated.
JOIN_TIMEOUT_S = 10.0
# Steps/s is measured over this many seconds; without a terminal, a progress line this often.
SPEED_INTERVAL_S = 5.0
PROGRESS_LINE_S = 30.0


class TrainingFailed(Exception):
    """A child process died; training stopped."""


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    steps: int
    episodes: int
    best_score: float | None
    exit_code: int  # 0 done, 130 after Ctrl-C, 143 after SIGTERM
    skipped_updates: int = 0
    restarts: int = 0

    @property
    def interrupted(self) -> bool:
        return self.exit_code != 0


def _process_context() -> Any:
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


def _ignore_sigint() -> None:
    # Ctrl-C reaches the whole process group; only the main process acts on it and tells
    # the children through the stop flag, so they end at a rollout boundary.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _name_process(name: str) -> None:
    """Show `name` for this process in top, ps -o comm and /proc/PID/comm (Linux only)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _child_main(name: str, shared: SharedObjects, body: Callable[[], None]) -> None:
    """Run a child's loop; a failure goes to the main process as text, then exit code 1."""
    _ignore_sigint()
    _name_process(name)
    try:
        body()
    except BaseException as error:
        if not parent_alive():
            os._exit(1)  # a failed send to the dead main process, most likely: nobody to tell
        report = f"{name} failed:\n{traceback.format_exc()}"
        shared.messages.put(ProcessFault(name, report, fatal=isinstance(error, TrainingDiverged)))
        os._exit(1)


def _worker_main(rank: int, config: TrainConfig, shared: SharedObjects) -> None:
    _child_main(f"a3c-worker-{rank}", shared, lambda: run_worker(rank, config, shared))


def _evaluator_main(config: TrainConfig, shared: SharedObjects, *args: Any) -> None:
    _child_main("a3c-evaluator", shared, lambda: run_evaluator(config, shared, *args))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class Terminated(KeyboardInterrupt):
    """SIGTERM: shut down like Ctrl-C, exit with 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


@dataclass
class _Child:
    """One role among the children, and the process now filling it."""

    name: str
    start: Callable[[], Any]  # makes and starts a fresh process for the role
    process: Any = None
    finished: bool = False


class Trainer:
    """One training run: `run()` returns when the budget is spent, the target is reached,
    or the user interrupts."""

    def __init__(
        self,
        config: TrainConfig,
        quiet: bool = False,
        resume: dict[str, Any] | None = None,
        resume_from: Path | None = None,
    ) -> None:
        """`resume` is a loaded checkpoint to continue from; its run folder, found from
        `resume_from`, receives the appended logs when it still exists."""
        info = describe_env(config.env, frame_size=config.frame_size)
        config = config.for_env(info.continuous, info.vector_observations)
        self.config = config
        self.quiet = quiet
        self.bar: tqdm | None = None  # _say needs it before training starts
        self.node = Node.from_environment()
        self.group = self._join_group(resume) if self.node is not None else None
        self.run_dir = self._run_directory(resume_from)
        if self.group is not None and self.group.restarted:
            resume = self._checkpoint_to_restart_from()
        resumed_seconds = float(resume.get("seconds", 0.0)) if resume else 0.0
        self.start_time = time.time() - resumed_seconds
        torch.manual_seed(config.seed)
        torch.set_num_threads(1)
        model = build_model(config, info)
        # Weights plus optimiser state: the folder must take a checkpoint before any child
        # process starts, or the run would fail at its first save.
        model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        self.run_dir.check_space(3 * model_bytes)
        self.context = _process_context()
        if not config.serial:
            # The server boots (imports torch) while this process builds the optimiser.
            multiprocessing.forkserver.ensure_running()
        model.share_memory()
        optimizer = make_shared_optimizer(
            config.optimizer,
            model.parameters(),
            lr=config.learning_rate,
            eps=config.optimizer_eps,
            rmsprop_alpha=config.rmsprop_alpha,
        )
        steps, episodes, self.best_score = 0, 0, None
        if resume is not None:
            model.load_state_dict(resume["model"])
            if resume.get("optimizer") is not None:
                optimizer.load_state_dict(resume["optimizer"])
                optimizer.share_memory()  # loading replaced the shared tensors
            steps, episodes = int(resume["step"]), int(resume.get("episodes", 0))
            self.best_score = resume.get("best_score")
        if self.group is not None:
            steps = self.group.start(model, steps)
        self.inbox: Inbox | LocalInbox = LocalInbox() if config.serial else Inbox(self.context)
        self.shared = SharedObjects.create(
            model,
            optimizer,
            self.inbox if config.serial else None,
            config.workers,
            context=self.context,
            steps=steps,
            episodes=episodes,
            update_locks=self.group is not None,
        )
        self.meetings_log = self.run_dir.open_log("meetings.csv", Meeting) if self.group else None
        self.last_meeting = time.monotonic()
        self.group_stopped = False
        self.group_left = False
        self.last_eval: EvalRecord | None = None
        self.signalled: int | None = None
        self.skipped_updates = 0
        self.restarts = 0
        self.fatal: str | None = None
        self.children: list[_Child] = []
        self.workers: list[_Child] = []  # this node's, by local index
        self.tensorboard = TensorBoardLog.open(self.run_dir.path)
        self.speed_sample = (time.monotonic(), steps)
        self.steps_per_second = 0.0
        self.plain_progress = False  # set in run(): no terminal, so periodic lines instead
        self.last_progress_line = time.monotonic()
        interval = config.checkpoint_interval
        self.next_checkpoint = (steps // interval + 1) * interval

    # ------------------------------------------------------------- several machines

    def _join_group(self, resume: dict[str, Any] | None) -> NodeGroup:
        """Join the other nodes; every node must have been given the same settings."""
        assert self.node is not None
        if self.config.serial:
            raise UsageError("several machines need --workers 1 or more on every node")
        if resume is not None:
            raise UsageError(
                "--resume is for one machine; a group started by torchrun --max-restarts "
                "resumes from its latest checkpoint by itself (docs/distributed.md)"
            )
        group = NodeGroup(self.node, self.config.node_timeout)
        settings = group.all_texts(to_toml(self.config))
        differing = [rank for rank, text in enumerate(settings) if text != settings[0]]
        if differing:
            group.close()
            raise UsageError(
                f"nodes {differing} were given other settings than node 0; "
                "give every node the same a3c-train flags"
            )
        return group

    def _run_directory(self, resume_from: Path | None) -> RunDirectory:
        """Node 0's run folder is the run's; node n writes `<its name>-node<n>` beside it.

        A group that torchrun restarted goes on in the folders of its first start, found by
        torchrun's run id (each node's is named after node 0's, so found on any machine).
        """
        if self.group is None:
            return RunDirectory.continue_or_create(self.config, resume_from)
        node = self.group.node
        name = ""
        if node.leader:
            earlier = (
                RunDirectory.of_group(self.config, node.run_id) if self.group.restarted else None
            )
            leader = earlier or RunDirectory.create(self.config, group_id=node.run_id)
            name = leader.path.name
        name = self.group.broadcast_text(name)
        if node.leader:
            return leader
        own = Path(self.config.run_dir) / f"{name}-node{node.rank}"
        if self.group.restarted and own.is_dir():
            return RunDirectory.reopen(self.config, own)
        return RunDirectory.named(self.config, own.name, group_id=node.run_id)

    def _checkpoint_to_restart_from(self) -> dict[str, Any] | None:
        """This node's latest.pt from before the restart, if it wrote one; the group then
        starts from whichever node's has the most steps (`NodeGroup.start`)."""
        latest = self.run_dir.latest_checkpoint
        if not latest.is_file():
            return None
        checkpoint = load_checkpoint(latest)
        self._say(f"a3c: restarted by torchrun; this node has {latest} at step "
                  f"{checkpoint['step']:,}")  # fmt: skip
        return checkpoint

    def _meet(self, stop: bool) -> Meeting:
        """One meeting of the nodes; a node that cannot reach the others ends the run."""
        assert self.group is not None and self.meetings_log is not None
        try:
            meeting = self.group.meet(self.shared, stop, self._worker_alive)
            hashes = self.group.all_texts(meeting.weights_hash)
        except RuntimeError as error:  # gloo: a node died, hung past node_timeout, or left
            self.group_left = True
            raise TrainingFailed(
                f"node {self.group.node.rank} lost the other nodes at meeting "
                f"{self.group.meetings + 1}: {str(error).splitlines()[0]}"
            ) from None
        meeting = dataclasses.replace(
            meeting,
            nodes_agree=len(set(hashes)) == 1,
            at=round(time.time() - self.start_time, 3),
        )
        self.meetings_log.write(meeting)
        self.last_meeting = time.monotonic()
        if meeting.stop:
            self.group_stopped = True
            if meeting.step < self.config.total_steps:
                # A node was interrupted or failed. When the budget is spent instead, this
                # node's counter has passed it too and its workers end their last rollouts,
                # while node 0's evaluator goes on to the final evaluation.
                self.shared.stop.set()
        return meeting

    def _meet_if_due(self) -> None:
        due = time.monotonic() - self.last_meeting >= self.config.sync_interval
        if self.group is not None and not self.group_stopped and due:
            self._meet(stop=False)

    def _leave_group(self) -> None:
        """The last meetings, once this node's workers have stopped: one that tells the
        others to stop (unless the group already agreed to), then one that counts every
        node's last steps, so all end on the same weights and the same total."""
        if self.group is None or self.group_left:
            return
        self.group_left = True
        if not self.group_stopped:
            self._meet(stop=True)
        self._meet(stop=True)

    # ------------------------------------------------------------------ reporting

    def _warn(self, text: str) -> None:
        """Problems go to stderr even with --quiet."""
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def _say(self, text: str) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def _handle(
        self, record: EpisodeRecord | EvalRecord | LossStats | SkippedUpdate | ProcessFault
    ) -> None:
        if isinstance(record, EpisodeRecord):
            self.run_dir.episodes.write(record)
            if self.tensorboard is not None:
                self.tensorboard.episode(record)
            return
        if isinstance(record, LossStats):
            self.run_dir.losses.write(record)
            if self.tensorboard is not None:
                self.tensorboard.losses(record)
            return
        if isinstance(record, SkippedUpdate):
            self.skipped_updates += 1
            self.run_dir.skipped.write(record)
            if self.skipped_updates <= 3:
                self._warn(
                    f"worker {record.worker} skipped an update at step {record.step:,}: "
                    f"{record.reason} (all are listed in skipped_updates.csv)"
                )
            return
        if isinstance(record, ProcessFault):
            self.run_dir.log_error(record.report)
            self._warn(record.report.rstrip())
            if record.fatal:
                self.fatal = record.report.splitlines()[-1]
            return
        self.run_dir.evals.write(record)
        self.last_eval = record
        if self.best_score is None or record.mean > self.best_score:
            self.best_score = record.mean
        if self.tensorboard is not None:
            self.tensorboard.evaluation(record, self.best_score)
        self._say(
            f"step {record.step:>10,}  eval {record.mean:9.2f} ± {record.std:7.2f}  "
            f"(min {record.min:g}, max {record.max:g}, length {record.mean_length:.0f})  "
            f"{record.seconds:7.1f}s"
        )
        target = self.config.target_score
        if target is not None and record.mean >= target:
            self._say(f"evaluation mean {record.mean:g} reached the target {target:g}; stopping")
            self.shared.stop.set()

    def _drain(self, timeout: float) -> int:
        """Handle the records the children sent, waiting up to `timeout` for the first;
        returns how many."""
        records = self.inbox.receive(timeout)
        for record in records:
            self._handle(record)
        return len(records)

    def _update_bar(self, steps: int) -> None:
        if self.bar is not None:
            self.bar.update(min(steps, self.config.total_steps) - self.bar.n)
            if self.last_eval is not None:
                self.bar.set_postfix(
                    eval=f"{self.last_eval.mean:.1f}", best=f"{self.best_score:.1f}", refresh=False
                )

    def _update_progress(self) -> None:
        """Bar, steps/s, progress line, and latest.pt at every checkpoint interval."""
        steps = self.shared.steps_done
        self._update_bar(steps)
        now = time.monotonic()
        if now - self.speed_sample[0] >= SPEED_INTERVAL_S:
            self._sample_speed(steps, now)
        if self.plain_progress and now - self.last_progress_line >= PROGRESS_LINE_S:
            self.last_progress_line = now
            self._say(self._progress_line(steps))
        if steps >= self.next_checkpoint:
            self.save_latest()
            interval = self.config.checkpoint_interval
            self.next_checkpoint = (steps // interval + 1) * interval

    def _sample_speed(self, steps: int, now: float) -> None:
        then, steps_then = self.speed_sample
        if steps == steps_then or now <= then:
            return
        self.steps_per_second = (steps - steps_then) / (now - then)
        self.speed_sample = (now, steps)
        if self.tensorboard is not None:
            self.tensorboard.speed(self.steps_per_second, steps)

    def _progress_line(self, steps: int) -> str:
        """What the bar shows, as one line, for logs that are not a terminal."""
        total = self.config.total_steps
        rate = self.steps_per_second
        parts = [f"step {steps:,}/{total:,} ({100 * steps / total:.0f}%)"]
        if rate > 0:
            eta = max(0.0, (total - steps) / rate)
            parts.append(f"{rate:,.0f} steps/s, ETA {int(eta // 60)}m{int(eta % 60):02d}s")
        if self.last_eval is not None and self.best_score is not None:
            parts.append(f"eval {self.last_eval.mean:.1f} (best {self.best_score:.1f})")
        return "  ".join(parts)

    def save_latest(self) -> None:
        with self.shared.updates_paused(self._worker_alive):
            checkpoint = build_checkpoint(
                model=self.shared.model,
                optimizer=self.shared.optimizer,
                config=self.config,
                step=self.shared.steps_done,
                episodes=self.shared.episodes_done,
                best_score=self.best_score,
                seconds=time.time() - self.start_time,
            )
        save_checkpoint(checkpoint, self.run_dir.latest_checkpoint)

    # ------------------------------------------------------------------- running

    def run(self) -> TrainResult:
        config = self.config
        resumed = self.shared.steps_done
        self._say(
            f"a3c: {config.env}, {config.workers} workers, {config.total_steps:,} agent steps"
            + (f" (resuming at {resumed:,})" if resumed else "")
            + f"; run folder {self.run_dir.path}"
        )
        path = atari_path(config.env, config.envs_per_worker, config.workers)
        if path is not None:
            self._say(f"a3c: {path}")
        encoder = self.shared.model.encoder
        if isinstance(encoder, ConvEncoder):  # said beside the emulator's path: both move speed
            arithmetic = "bfloat16" if encoder.in_bfloat16 else "float32"
            self._say(f"a3c: frame encoder in {arithmetic} (--precision {config.precision})")
        missing = [
            view
            for view, module in (
                ("TensorBoard logs: pip install 'a3c[tensorboard]'", "tensorboard"),
                ("a3c-plot: pip install 'a3c[plot]'", "matplotlib"),
            )
            if not _installed(module)
        ]
        if missing:
            self._say("a3c: optional views not installed; " + "; ".join(missing))
        self.bar = tqdm(
            total=config.total_steps,
            initial=min(resumed, config.total_steps),
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=self.quiet or None,  # None: shown on a terminal only
            smoothing=0.05,
        )
        self.plain_progress = self.bar.disable and not self.quiet
        exit_code = 0
        failure: TrainingFailed | None = None
        in_main_thread = threading.current_thread() is threading.main_thread()
        if in_main_thread:
            handler = _raise_terminated if config.serial else self._note_signal
            previous_sigterm = signal.signal(signal.SIGTERM, handler)
            if not config.serial:
                signal.signal(signal.SIGINT, self._note_signal)
        try:
            if config.serial:
                self._run_serial()
            else:
                self._run_parallel()
        except KeyboardInterrupt as interrupt:
            exit_code = 143 if isinstance(interrupt, Terminated) else 130
            if in_main_thread:
                # A second Ctrl-C or SIGTERM ends everything at once, children included.
                signal.signal(signal.SIGINT, self._exit_now)
                signal.signal(signal.SIGTERM, self._exit_now)
            self._warn("interrupted: stopping workers and saving a final checkpoint "
                       "(interrupt again to quit at once)")  # fmt: skip
        finally:
            self.shared.stop.set()
            self._stop_children()
            try:
                self._leave_group()
            except TrainingFailed as error:
                failure = error
            # Not _update_progress: the final latest.pt is written just below, once. The
            # last stretch's speed is still logged, so even a short run has an SPS point.
            self._update_bar(self.shared.steps_done)
            self._sample_speed(self.shared.steps_done, time.monotonic())
            self.bar.close()
            self.bar = None
            self.save_latest()
            self.run_dir.close()
            if self.tensorboard is not None:
                self.tensorboard.close()
            if in_main_thread:
                signal.signal(signal.SIGTERM, previous_sigterm)
                signal.signal(signal.SIGINT, signal.default_int_handler)
            if self.group is not None:
                self.group.close()
        if failure is not None:
            raise failure
        return TrainResult(
            run_dir=self.run_dir.path,
            steps=self.shared.steps_done,
            episodes=self.shared.episodes_done,
            best_score=self.best_score,
            exit_code=exit_code,
            skipped_updates=self.skipped_updates,
            restarts=self.restarts,
        )

    def _worker_alive(self, index: int) -> bool:
        """Whether this node's worker `index` runs (its update lock is then live)."""
        process = self.workers[index].process if index < len(self.workers) else None
        return process is not None and process.is_alive()

    def _note_signal(self, signum: int, frame: Any) -> None:
        """Ctrl-C or SIGTERM in a parallel run: noted here and raised by the main loop
        (`_raise_if_signalled`), never inside a read of the children's pipes. Raised there,
        it left half a message in the pipe, and the shutdown's own drain unpickled the rest
        ("EOFError: Ran out of input") instead of saving the final checkpoint."""
        self.signalled = signum

    def _raise_if_signalled(self) -> None:
        if self.signalled == signal.SIGTERM:
            raise Terminated
        if self.signalled is not None:
            raise KeyboardInterrupt

    def _exit_now(self, signum: int, frame: Any) -> None:
        for child in self.children:
            if child.process is not None and child.process.is_alive():
                child.process.kill()
        os._exit(128 + signum)

    def _run_serial(self) -> None:
        """Worker and evaluator in this process: plain Python, debuggable, no children."""
        worker = Worker(0, self.config, self.shared)
        evaluator = Evaluator(
            self.config, self.shared, self.run_dir.best_checkpoint, self.start_time, self.best_score
        )
        try:
            while (
                self.shared.steps_done < self.config.total_steps and not self.shared.stop.is_set()
            ):
                try:
                    worker.train_once()
                except TrainingDiverged as error:
                    self._drain(timeout=0)
                    raise TrainingFailed(str(error)) from None
                if evaluator.due:
                    evaluator.evaluate()
                self._drain(timeout=0)
                self._update_progress()
            if evaluator.last_step != self.shared.steps_done and not self.shared.stop.is_set():
                evaluator.evaluate()
            self._drain(timeout=0)
        finally:
            worker.close()
            evaluator.close()

    def _run_parallel(self) -> None:
        config, shared, context = self.config, self.shared, self.context
        training_done = Flag(context)

        inbox = self.inbox
        assert isinstance(inbox, Inbox)

        def starter(
            name: str,
            target: Callable[..., None],
            args: Callable[[SharedObjects], tuple],
            slot: int = MAIN_SLOT,
        ) -> Callable[[], Any]:
            def start() -> Any:
                # Every start gets a new pipe, and a worker a new update lock: a killed
                # predecessor may have died holding its lock or half-way through a send.
                outbox = inbox.outbox()
                if shared.update_locks and slot != MAIN_SLOT:
                    shared.update_locks[slot - 1] = context.Lock()
                own = dataclasses.replace(shared, messages=outbox, slot=slot)
                process = context.Process(target=target, args=args(own), name=name, daemon=True)
                process.start()
                outbox.connection.close()
                return process

            return start

        evaluator = _Child(
            "a3c-evaluator",
            starter(
                "a3c-evaluator",
                _evaluator_main,
                # A restarted evaluator must know the best score so far, not the first one.
                lambda own: (config, own, self.run_dir.best_checkpoint, self.start_time,
                             training_done, self.best_score),
            ),
        )  # fmt: skip
        # Ranks run on across nodes: node n's workers are n*W .. n*W+W-1 (their seeds too).
        first = self.node.rank * config.workers if self.node is not None else 0

        def worker_args(rank: int) -> Callable[[SharedObjects], tuple]:
            return lambda own: (rank, config, own)

        workers = [
            _Child(name, starter(name, _worker_main, worker_args(first + index), slot=1 + index))
            for index, name in ((i, f"a3c-worker-{first + i}") for i in range(config.workers))
        ]
        # The evaluator starts first so that it is not starved while the workers train. Of
        # several nodes, node 0 alone evaluates.
        evaluates = self.node is None or self.node.leader
        self.workers = workers
        self.children = [evaluator, *workers] if evaluates else workers
        for child in self.children:
            child.process = child.start()
        self.last_meeting = time.monotonic()
        while not all(w.finished for w in workers):
            self._drain(timeout=0.1)
            self._raise_if_signalled()
            self._update_progress()
            self._supervise()
            self._meet_if_due()
        # The final evaluation is of the weights every node ends with.
        self._leave_group()
        if not evaluates:
            return
        training_done.set()
        while not evaluator.finished:
            self._drain(timeout=0.1)
            self._raise_if_signalled()
            self._supervise()
        self._drain(timeout=0)

    def _supervise(self) -> None:
        """Notice children that ended; restart failed ones, up to max_restarts in all."""
        if self.fatal is not None:
            raise TrainingFailed(self.fatal)
        for child in self.children:
            code = child.process.exitcode
            if child.finished or code is None:
                continue
            if code == 0:
                child.finished = True
                continue
            self._drain(timeout=0.2)  # its traceback, if it sent one
            if self.fatal is not None:
                raise TrainingFailed(self.fatal)
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            if self.restarts >= self.config.max_restarts or self.shared.stop.is_set():
                raise TrainingFailed(
                    f"{child.name} {how}, after {self.restarts} restarts "
                    f"(--max-restarts {self.config.max_restarts})"
                )
            self.restarts += 1
            message = f"{child.name} {how}; restarting it from the shared weights"
            self.run_dir.log_error(message)
            self._warn(message + f" (restart {self.restarts} of {self.config.max_restarts})")
            child.process = child.start()

    def _stop_children(self) -> None:
        """Join every child, draining records so none blocks on a full pipe; then kill."""
        processes = [c.process for c in self.children if c.process is not None]
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
            self._drain(timeout=0.05)
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join(timeout=1.0)
            if process.is_alive():
                process.kill()
                process.join()
        while self._drain(timeout=0):
            pass
        self.inbox.close()


def train(
    config: TrainConfig,
    quiet: bool = False,
    resume: dict[str, Any] | None = None,
    resume_from: Path | None = None,
) -> TrainResult:
    """Run training as `config` says (continuing `resume` if given); return where its files are."""
    return Trainer(config, quiet=quiet, resume=resume, resume_from=resume_from).run()


def stop_helper_processes() -> None:
    """Stop multiprocessing's fork server and resource tracker, and wait until they exit.

    Left alone, each notices only once this process has exited, so a3c-train returned while
    they were still in its process group (as unreaped zombies for about 1.2 s here):
    processes that torchrun or a job scheduler no longer tracks. Call it once training is
    over and every child has been joined.
    """
    # The run's locks and queues unregister their semaphores as they are collected; the
    # tracker would report any still registered when it stops as leaked.
    gc.collect()
    # Private, but in every Python a3c supports (3.11 on): the only way to join them.
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]
    multiprocessing.resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]


def format_summary(result: TrainResult) -> str:
    best = (
        "none"
        if result.best_score is None or math.isnan(result.best_score)
        else (f"{result.best_score:g}")
    )
    troubles = ""
    if result.skipped_updates or result.restarts:
        troubles = f", {result.skipped_updates} skipped updates, {result.restarts} process restarts"
    return (
        f"done: {result.steps:,} agent steps, {result.episodes:,} episodes, "
        f"best evaluation {best}{troubles}; files in {result.run_dir}"
    )


__all__ = [
    "TrainResult",
    "Trainer",
    "TrainingFailed",
    "format_summary",
    "stop_helper_processes",
    "train",
]
