"""Records from the children to the run's files and the console: a reporter and its sinks.

The `Reporter` hands each record to every sink that has a handler for its type (the
method named in `HANDLERS`), in the sinks' order. `RunStatus` comes first, so the others
see the best score with an evaluation included; then the CSV files, TensorBoard and the
console.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from a3c.config import TrainConfig
from a3c.metrics import (
    EpisodeRecord,
    EvalRecord,
    LossStats,
    ProcessFault,
    ProcessRestart,
    RunDirectory,
    SkippedUpdate,
    SpeedSample,
)

# The sink method that handles each record type.
HANDLERS: dict[type, str] = {
    EpisodeRecord: "episode",
    EvalRecord: "evaluation",
    LossStats: "losses",
    SkippedUpdate: "skipped_update",
    ProcessFault: "process_fault",
    ProcessRestart: "process_restart",
    SpeedSample: "speed",
}
# Skipped updates the console warns of; the rest go to skipped_updates.csv only.
SKIPS_WARNED = 3
# Steps/s is measured over this many seconds; without a terminal, a progress line this often.
SPEED_INTERVAL_S = 5.0
PROGRESS_LINE_S = 30.0


class Reporter:
    """Hands every record to the sinks that handle its type."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    def report(self, record: Any) -> None:
        name = HANDLERS[type(record)]
        for sink in self.sinks:
            handler = getattr(sink, name, None)
            if handler is not None:
                handler(record)

    def close(self) -> None:
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                close()


class RunStatus:
    """What the main process keeps of the records: the best and last evaluation, skipped
    updates and a fatal failure; `stop` is called once an evaluation reaches the target."""

    def __init__(self, config: TrainConfig, best_score: float | None, stop: Callable[[], None]):
        self.target = config.target_score
        self.stop = stop
        self.best_score = best_score
        self.last_eval: EvalRecord | None = None
        self.skipped_updates = 0
        self.fatal: str | None = None

    def evaluation(self, record: EvalRecord) -> None:
        self.last_eval = record
        if self.best_score is None or record.mean > self.best_score:
            self.best_score = record.mean
        if self.target is not None and record.mean >= self.target:
            self.stop()

    def skipped_update(self, record: SkippedUpdate) -> None:
        self.skipped_updates += 1

    def process_fault(self, record: ProcessFault) -> None:
        if record.fatal:
            self.fatal = record.report.splitlines()[-1]


class CsvSink:
    """The run folder's CSV logs and errors.log."""

    def __init__(self, run_dir: RunDirectory) -> None:
        self.run_dir = run_dir

    def episode(self, record: EpisodeRecord) -> None:
        self.run_dir.episodes.write(record)

    def evaluation(self, record: EvalRecord) -> None:
        self.run_dir.evals.write(record)

    def losses(self, record: LossStats) -> None:
        self.run_dir.losses.write(record)

    def skipped_update(self, record: SkippedUpdate) -> None:
        self.run_dir.skipped.write(record)

    def process_fault(self, record: ProcessFault) -> None:
        self.run_dir.log_error(record.report)

    def process_restart(self, record: ProcessRestart) -> None:
        self.run_dir.log_error(record.message)

    def close(self) -> None:
        self.run_dir.close()


class TensorBoardSink:
    """Event files in the run folder with the documented tags (docs/observability.md).

    `open` returns None when tensorboard is not installed; training runs the same without.
    """

    def __init__(self, writer: Any, status: RunStatus) -> None:
        self.writer = writer
        self.status = status

    @classmethod
    def open(cls, path: Path, status: RunStatus) -> TensorBoardSink | None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            return None
        return cls(SummaryWriter(log_dir=str(path), flush_secs=10), status)

    def episode(self, record: EpisodeRecord) -> None:
        self.writer.add_scalar("charts/episodic_return", record.score, record.step)
        self.writer.add_scalar("charts/episodic_length", record.length, record.step)

    def evaluation(self, record: EvalRecord) -> None:
        for tag, value in (
            ("eval/episodic_return", record.mean),
            ("eval/episodic_return_std", record.std),
            ("eval/episodic_return_min", record.min),
            ("eval/episodic_return_max", record.max),
            ("eval/episodic_length", record.mean_length),
            ("eval/best_episodic_return", self.status.best_score),
        ):
            self.writer.add_scalar(tag, value, record.step)

    def losses(self, record: LossStats) -> None:
        for tag, value in (
            ("losses/policy_loss", record.policy_loss),
            ("losses/value_loss", record.value_loss),
            ("losses/entropy", record.entropy),
            ("losses/grad_norm", record.grad_norm),
            ("charts/learning_rate", record.learning_rate),
        ):
            self.writer.add_scalar(tag, value, record.step)
        for layer, sigma in record.noise_sigmas().items():
            self.writer.add_scalar(f"noise/sigma_{layer}", sigma, record.step)

    def speed(self, record: SpeedSample) -> None:
        self.writer.add_scalar("charts/SPS", record.steps_per_second, record.step)

    def close(self) -> None:
        self.writer.close()


class Console:
    """The terminal: a progress bar (or, without a terminal, a progress line every
    PROGRESS_LINE_S), evaluation lines, and warnings, which --quiet does not silence."""

    def __init__(self, config: TrainConfig, status: RunStatus, quiet: bool) -> None:
        self.total = config.total_steps
        self.status = status
        self.quiet = quiet
        self.bar: tqdm | None = None
        self.plain_progress = False
        self.last_progress_line = time.monotonic()
        self.speed_sample: tuple[float, int] = (time.monotonic(), 0)
        self.steps_per_second = 0.0

    def say(self, text: str) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def warn(self, text: str) -> None:
        """Problems go to stderr even with --quiet."""
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def open_bar(self, steps: int) -> None:
        self.speed_sample = (time.monotonic(), steps)
        self.bar = tqdm(
            total=self.total,
            initial=min(steps, self.total),
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=self.quiet or None,  # None: shown on a terminal only
            smoothing=0.05,
        )
        self.plain_progress = self.bar.disable and not self.quiet

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def evaluation(self, record: EvalRecord) -> None:
        self.say(
            f"step {record.step:>10,}  eval {record.mean:9.2f} ± {record.std:7.2f}  "
            f"(min {record.min:g}, max {record.max:g}, length {record.mean_length:.0f})  "
            f"{record.seconds:7.1f}s"
        )
        target = self.status.target
        if target is not None and record.mean >= target:
            self.say(f"evaluation mean {record.mean:g} reached the target {target:g}; stopping")

    def skipped_update(self, record: SkippedUpdate) -> None:
        if self.status.skipped_updates <= SKIPS_WARNED:
            self.warn(
                f"worker {record.worker} skipped an update at step {record.step:,}: "
                f"{record.reason} (all are listed in skipped_updates.csv)"
            )

    def process_fault(self, record: ProcessFault) -> None:
        self.warn(record.report.rstrip())

    def process_restart(self, record: ProcessRestart) -> None:
        self.warn(f"{record.message} (restart {record.number} of {record.allowed})")

    def update_bar(self, steps: int) -> None:
        if self.bar is None:
            return
        self.bar.update(min(steps, self.total) - self.bar.n)
        last, best = self.status.last_eval, self.status.best_score
        if last is not None and best is not None:
            self.bar.set_postfix(eval=f"{last.mean:.1f}", best=f"{best:.1f}", refresh=False)

    def sample_speed(self, steps: int, now: float, every: float = 0.0) -> SpeedSample | None:
        """Steps/s since the last sample, once `every` seconds have passed since it."""
        then, steps_then = self.speed_sample
        if now - then < every or steps == steps_then or now <= then:
            return None
        self.steps_per_second = (steps - steps_then) / (now - then)
        self.speed_sample = (now, steps)
        return SpeedSample(steps, self.steps_per_second)

    def progress(self, steps: int) -> SpeedSample | None:
        """Bar, and without a terminal a progress line now and then; a speed sample every
        SPEED_INTERVAL_S, for the reporter."""
        self.update_bar(steps)
        now = time.monotonic()
        sample = self.sample_speed(steps, now, SPEED_INTERVAL_S)
        if self.plain_progress and now - self.last_progress_line >= PROGRESS_LINE_S:
            self.last_progress_line = now
            self.say(self.progress_line(steps))
        return sample

    def progress_line(self, steps: int) -> str:
        """What the bar shows, as one line, for logs that are not a terminal."""
        total, rate = self.total, self.steps_per_second
        parts = [f"step {steps:,}/{total:,} ({100 * steps / total:.0f}%)"]
        if rate > 0:
            eta = max(0.0, (total - steps) / rate)
            parts.append(f"{rate:,.0f} steps/s, ETA {int(eta // 60)}m{int(eta % 60):02d}s")
        last, best = self.status.last_eval, self.status.best_score
        if last is not None and best is not None:
            parts.append(f"eval {last.mean:.1f} (best {best:.1f})")
        return "  ".join(parts)
