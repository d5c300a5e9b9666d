"""Orchestration: set up the shared model and the run, then the main loop of docs/design.md's
picture. Children are the supervisor's (a3c/supervisor.py), records the reporter's
(a3c/reporting.py), the nodes' meetings the group's (a3c/distributed.py)."""

from __future__ import annotations

import importlib.util
import math
import multiprocessing.forkserver
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from a3c.batches import atari_path
from a3c.checkpoint import build_checkpoint, save_checkpoint
from a3c.config import TrainConfig
from a3c.distributed import join_group
from a3c.envs import EnvRecipe, describe_env
from a3c.errors import TrainingDiverged, TrainingFailed
from a3c.evaluator import Evaluator, run_evaluator
from a3c.metrics import RunDirectory
from a3c.model import ActorCritic, build_model
from a3c.optim import make_shared_optimizer
from a3c.profile import EnvProfile
from a3c.reporting import Console, CsvSink, Reporter, RunStatus, TensorBoardSink
from a3c.sharing import MAIN_SLOT, Flag, Inbox, LocalInbox, SharedObjects
from a3c.supervisor import Child, Supervisor, Terminated, child_main, process_context
from a3c.worker import Worker, run_worker

# Optional views a run mentions once when their packages are missing.
OPTIONAL_VIEWS = {
    "tensorboard": "TensorBoard logs: pip install 'a3c[tensorboard]'",
    "matplotlib": "a3c-plot: pip install 'a3c[plot]'",
}


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


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _printer(quiet: bool) -> Callable[[str], None]:
    """What says a line before the run's console exists."""
    return (lambda text: None) if quiet else print


def _shared_learner(
    config: TrainConfig, profile: EnvProfile, run_dir: RunDirectory, resume: dict[str, Any] | None
) -> tuple[ActorCritic, torch.optim.Optimizer]:
    """The model and optimiser in shared memory, resumed where `resume` says."""
    torch.manual_seed(config.seed)
    torch.set_num_threads(1)
    model = build_model(config, profile)
    # Weights plus optimiser state: the folder must take a checkpoint before any child
    # process starts, or the run would fail at its first save.
    run_dir.check_space(3 * sum(p.numel() * p.element_size() for p in model.parameters()))
    if not config.serial:
        # The server boots (imports torch) while this process builds the optimiser.
        multiprocessing.forkserver.ensure_running()
    model.share_memory()
    optimizer = make_shared_optimizer(
        config.optimizer, model.parameters(), lr=config.learning_rate,
        eps=config.optimizer_eps, rmsprop_alpha=config.rmsprop_alpha,
    )  # fmt: skip
    if resume is not None:
        model.load_state_dict(resume["model"])
        if resume.get("optimizer") is not None:
            optimizer.load_state_dict(resume["optimizer"])
            optimizer.share_memory()  # loading replaced the shared tensors
    return model, optimizer


def _announce(config: TrainConfig, shared: SharedObjects, run_dir: Path, say: Callable) -> None:
    """The run's first lines: what trains where, and what moves its speed."""
    resumed = f" (resuming at {shared.steps_done:,})" if shared.steps_done else ""
    say(f"a3c: {config.env}, {config.workers} workers, {config.total_steps:,} agent steps"
        f"{resumed}; run folder {run_dir}")  # fmt: skip
    path = atari_path(EnvRecipe.of(config), config.envs_per_worker, config.workers)
    if path is not None:
        say(f"a3c: {path}")
    arithmetic = shared.model.frame_arithmetic
    if arithmetic is not None:  # said beside the emulator's path: both move speed
        say(f"a3c: frame encoder in {arithmetic} (--precision {config.precision})")
    missing = [view for module, view in OPTIONAL_VIEWS.items() if not _installed(module)]
    if missing:
        say("a3c: optional views not installed; " + "; ".join(missing))


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
        profile = describe_env(EnvRecipe.of(config))
        self.config = config = profile.fill_defaults(config)
        self.group = join_group(config, resume)
        self.run_dir = self.group.run_directory(config, resume_from)
        resume = self.group.resume_point(self.run_dir, resume, _printer(quiet))
        self.start_time = time.time() - (float(resume.get("seconds", 0.0)) if resume else 0.0)
        self.context = process_context()
        model, optimizer = _shared_learner(config, profile, self.run_dir, resume)
        steps, episodes = (
            (int(resume["step"]), int(resume.get("episodes", 0))) if resume else (0, 0)
        )
        best_score = resume.get("best_score") if resume else None
        steps = self.group.start(model, steps)
        self.inbox = LocalInbox() if config.serial else Inbox(self.context)
        self.shared = SharedObjects.create(
            model, optimizer, profile, self.inbox if config.serial else None, config.workers,
            context=self.context, steps=steps, episodes=episodes,
            update_locks=self.group.update_locks,
        )  # fmt: skip
        self.status = RunStatus(config, best_score, self.shared.stop.set)
        self.console = Console(config, self.status, quiet)
        tensorboard = TensorBoardSink.open(self.run_dir.path, self.status)
        sinks = (self.status, CsvSink(self.run_dir), tensorboard, self.console)
        self.reporter = Reporter(*(sink for sink in sinks if sink is not None))
        self.supervisor = Supervisor(self.shared, self.inbox, self.context, self.reporter,
                                     self.status, config.max_restarts)  # fmt: skip
        self.workers: list[Child] = []  # this node's, by local index
        self.group.attach(self.shared, self.run_dir, self.start_time, self._worker_alive)
        interval = config.checkpoint_interval
        self.next_checkpoint = (steps // interval + 1) * interval

    def _worker_alive(self, index: int) -> bool:
        """Whether this node's worker `index` runs (its update lock is then live)."""
        worker = self.workers[index] if index < len(self.workers) else None
        return self.supervisor.alive(worker)

    def save_latest(self) -> None:
        with self.shared.updates_paused(self._worker_alive):
            checkpoint = build_checkpoint(
                model=self.shared.model, optimizer=self.shared.optimizer, config=self.config,
                step=self.shared.steps_done, episodes=self.shared.episodes_done,
                best_score=self.status.best_score, seconds=time.time() - self.start_time,
            )  # fmt: skip
        save_checkpoint(checkpoint, self.run_dir.latest_checkpoint)

    def _progress(self) -> None:
        """Bar, steps/s, progress line, and latest.pt at every checkpoint interval."""
        steps = self.shared.steps_done
        sample = self.console.progress(steps)
        if sample is not None:
            self.reporter.report(sample)
        if steps >= self.next_checkpoint:
            self.save_latest()
            interval = self.config.checkpoint_interval
            self.next_checkpoint = (steps // interval + 1) * interval

    def run(self) -> TrainResult:
        _announce(self.config, self.shared, self.run_dir.path, self.console.say)
        self.console.open_bar(self.shared.steps_done)
        exit_code, failure = 0, None
        signals = self.supervisor.signals
        with signals.handled(self.config.serial):
            try:
                self._run_serial() if self.config.serial else self._run_parallel()
            except KeyboardInterrupt as interrupt:
                exit_code = 143 if isinstance(interrupt, Terminated) else 130
                signals.second_ends_everything(self.supervisor.processes)
                self.console.warn("interrupted: stopping workers and saving a final "
                                  "checkpoint (interrupt again to quit at once)")  # fmt: skip
            finally:
                self.shared.stop.set()
                self.supervisor.stop()
                try:
                    self.group.leave()
                except TrainingFailed as error:
                    failure = error
                # The final latest.pt is written just below, once; the last stretch's speed
                # is still logged, so even a short run has an SPS point.
                steps = self.shared.steps_done
                self.console.update_bar(steps)
                sample = self.console.sample_speed(steps, time.monotonic())
                if sample is not None:
                    self.reporter.report(sample)
                self.console.close()
                self.save_latest()
                self.reporter.close()
                self.group.close()
        if failure is not None:
            raise failure
        return TrainResult(
            run_dir=self.run_dir.path, steps=self.shared.steps_done,
            episodes=self.shared.episodes_done, best_score=self.status.best_score,
            exit_code=exit_code, skipped_updates=self.status.skipped_updates,
            restarts=self.supervisor.restarts,
        )  # fmt: skip

    def _run_serial(self) -> None:
        """Worker and evaluator in this process: plain Python, debuggable, no children."""
        shared, drain = self.shared, self.supervisor.drain
        worker = Worker(0, self.config, shared)
        evaluator = Evaluator(self.config, shared, self.run_dir.best_checkpoint,
                              self.start_time, self.status.best_score)  # fmt: skip
        try:
            while shared.steps_done < self.config.total_steps and not shared.stop.is_set():
                try:
                    worker.train_once()
                except TrainingDiverged as error:
                    drain(0)
                    raise TrainingFailed(str(error)) from None
                if evaluator.due:
                    evaluator.evaluate()
                drain(0)
                self._progress()
            if evaluator.last_step != shared.steps_done and not shared.stop.is_set():
                evaluator.evaluate()
            drain(0)
        finally:
            worker.close()
            evaluator.close()

    def _worker(self, index: int) -> Child:
        """This node's worker `index`; ranks (and seeds) run on across nodes."""
        rank = self.group.first_rank + index
        name, config = f"a3c-worker-{rank}", self.config
        return Child(name, child_main, lambda own: (name, own, run_worker, rank, config, own),
                     slot=MAIN_SLOT + 1 + index)  # fmt: skip

    def _run_parallel(self) -> None:
        config, supervisor = self.config, self.supervisor
        training_done = Flag(self.context)
        evaluator = Child(
            "a3c-evaluator", child_main,
            # A restarted evaluator must know the best score so far, not the first one.
            lambda own: ("a3c-evaluator", own, run_evaluator, config, own,
                         self.run_dir.best_checkpoint, self.start_time, training_done,
                         self.status.best_score),
        )  # fmt: skip
        if self.group.evaluates:  # first, so that it is not starved while the workers train
            supervisor.add(evaluator)
        for index in range(config.workers):
            self.workers.append(supervisor.add(self._worker(index)))
        supervisor.start_all()
        while not supervisor.finished(*self.workers):
            supervisor.wait()
            self._progress()
            self.group.meet_if_due()
        self.group.leave()  # the final evaluation is of the weights every node ends with
        if not self.group.evaluates:
            return
        training_done.set()
        while not supervisor.finished(evaluator):
            supervisor.wait()
        supervisor.drain(timeout=0)


def train(
    config: TrainConfig,
    quiet: bool = False,
    resume: dict[str, Any] | None = None,
    resume_from: Path | None = None,
) -> TrainResult:
    """Run training as `config` says (continuing `resume` if given); return where its files are."""
    return Trainer(config, quiet=quiet, resume=resume, resume_from=resume_from).run()


def format_summary(result: TrainResult) -> str:
    best = "none" if result.best_score is None or math.isnan(result.best_score) else (
        f"{result.best_score:g}")  # fmt: skip
    troubles = ""
    if result.skipped_updates or result.restarts:
        troubles = f", {result.skipped_updates} skipped updates, {result.restarts} process restarts"
    return (
        f"done: {result.steps:,} agent steps, {result.episodes:,} episodes, "
        f"best evaluation {best}{troubles}; files in {result.run_dir}"
    )


__all__ = ["TrainResult", "Trainer", "TrainingFailed", "format_summary", "train"]
