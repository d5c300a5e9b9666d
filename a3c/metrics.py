"""The records the children send to the main process, and the run folder that keeps them."""

from __future__ import annotations

import csv
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Any

from a3c.config import TrainConfig
from a3c.errors import UsageError
from a3c.presets import to_toml


@dataclass(frozen=True)
class EpisodeRecord:
    """A training episode a worker finished; score and length are the unclipped real ones."""

    worker: int
    step: int
    score: float
    length: int


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation of the shared weights as they were at `step`."""

    step: int
    seconds: float
    mean: float
    std: float
    min: float
    max: float
    mean_length: float
    episodes: int  # how many games the mean is over


@dataclass(frozen=True)
class LossStats:
    """One worker's loss terms, averaged over its last `updates` updates."""

    worker: int
    step: int
    updates: int
    policy_loss: float
    value_loss: float
    entropy: float
    grad_norm: float
    learning_rate: float
    # Mean |sigma| of each NoisyNet layer at the last update; None without that layer.
    sigma_encoder: float | None = None
    sigma_core: float | None = None
    sigma_policy: float | None = None
    sigma_value: float | None = None

    def noise_sigmas(self) -> dict[str, float]:
        """The noisy layers' mean |sigma| by layer, only those the model has."""
        values = {
            "encoder": self.sigma_encoder,
            "core": self.sigma_core,
            "policy": self.sigma_policy,
            "value": self.sigma_value,
        }
        return {name: value for name, value in values.items() if value is not None}


@dataclass(frozen=True)
class SkippedUpdate:
    """An update a worker did not hand over, because its loss or gradient was not finite."""

    worker: int
    step: int
    reason: str


@dataclass(frozen=True)
class ProcessFault:
    """A child process failed; `fatal` means training must stop rather than restart it."""

    process: str
    report: str
    fatal: bool


@dataclass(frozen=True)
class ProcessRestart:
    """The main process restarted a failed child: restart `number` of `allowed`."""

    message: str
    number: int
    allowed: int


@dataclass(frozen=True)
class SpeedSample:
    """Training speed over the last few seconds, at `step`."""

    step: int
    steps_per_second: float


class _CsvLog:
    """Append-only CSV with a header, flushed per row so a crash loses nothing written.

    A file that exists keeps its header: a run resumed from before a column was added
    goes on without that column rather than misaligning every row after it.
    """

    def __init__(self, path: Path, record_type: type) -> None:
        self.columns = [f.name for f in fields(record_type)]
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            with path.open(newline="") as existing:
                self.columns = next(csv.reader(existing), self.columns)
        self._file: IO[str] = path.open("a", newline="")
        self._writer = csv.DictWriter(
            self._file, fieldnames=self.columns, extrasaction="ignore", restval=""
        )
        if new:
            self._writer.writeheader()
            self._file.flush()

    def write(self, record: Any) -> None:
        self._writer.writerow(asdict(record))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


# In each run folder of a node of several: torchrun's run id, by which a restart finds it.
GROUP_FILE = "torchrun-run-id"


class RunDirectory:
    """``<run_dir>/<env>-<yyyymmdd-hhmmss>/`` with config.toml, the CSV logs and checkpoints/."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoints = path / "checkpoints"
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        self.episodes = _CsvLog(path / "episodes.csv", EpisodeRecord)
        self.evals = _CsvLog(path / "eval.csv", EvalRecord)
        self.skipped = _CsvLog(path / "skipped_updates.csv", SkippedUpdate)
        self.losses = _CsvLog(path / "losses.csv", LossStats)
        self._errors_path = path / "errors.log"
        self._extra_logs: list[_CsvLog] = []

    def log_error(self, text: str) -> None:
        """Append a report (a traceback, say) to errors.log, flushed at once."""
        with self._errors_path.open("a") as file:
            file.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text.rstrip()}\n")

    @classmethod
    def create(cls, config: TrainConfig, group_id: str | None = None) -> RunDirectory:
        """A new, uniquely named run folder, with the config written into it."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        # The id without its module (module:Id), and no folder separators in it.
        name = config.env.rpartition(":")[2].replace("/", "-")
        return cls.named(config, f"{name}-{stamp}", group_id)

    @classmethod
    def named(cls, config: TrainConfig, base: str, group_id: str | None = None) -> RunDirectory:
        """A new run folder called `base` (or `base-2`, ... if taken), with the config, and
        for a node of several the group's torchrun run id (`GROUP_FILE`)."""
        parent = Path(config.run_dir)
        try:
            parent.mkdir(parents=True, exist_ok=True)
            for attempt in range(1, 1000):
                path = parent / (base if attempt == 1 else f"{base}-{attempt}")
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    continue
            (path / "config.toml").write_text(to_toml(config))
            if group_id is not None:
                (path / GROUP_FILE).write_text(group_id + "\n")
            return cls(path)
        except OSError as error:
            raise UsageError(f"cannot write the run folder under {parent}: {error}") from None

    @classmethod
    def reopen(cls, config: TrainConfig, path: Path) -> RunDirectory:
        """An existing run folder, its logs appended to, its config rewritten."""
        try:
            (path / "config.toml").write_text(to_toml(config))
            return cls(path)
        except OSError as error:
            raise UsageError(f"cannot write the run folder {path}: {error}") from None

    @classmethod
    def of_group(cls, config: TrainConfig, group_id: str) -> RunDirectory | None:
        """The newest node-0 run folder of the torchrun group `group_id`, reopened."""
        parent = Path(config.run_dir)
        found = [
            marker.parent
            for marker in parent.glob(f"*/{GROUP_FILE}")
            if marker.read_text().strip() == group_id and "-node" not in marker.parent.name
        ]
        if not found:
            return None
        return cls.reopen(config, max(found, key=lambda folder: folder.stat().st_mtime))

    @classmethod
    def continue_or_create(cls, config: TrainConfig, checkpoint: Path | None) -> RunDirectory:
        """The run folder a checkpoint came from (logs are appended there), else a new one."""
        if checkpoint is not None:
            folder = checkpoint.resolve().parent.parent
            if (folder / "config.toml").is_file() and checkpoint.parent.name == "checkpoints":
                return cls.reopen(config, folder)
        return cls.create(config)

    def check_space(self, nbytes: int) -> None:
        """Write and remove a file of `nbytes` in checkpoints/; `UsageError` if that fails."""
        probe = self.checkpoints / ".space-check"
        try:
            with probe.open("wb") as file:
                file.write(bytes(nbytes))
                file.flush()
                os.fsync(file.fileno())
        except OSError as error:
            raise UsageError(
                f"cannot write checkpoints to {self.checkpoints}: {error.strerror or error}"
            ) from None
        finally:
            probe.unlink(missing_ok=True)

    def open_log(self, name: str, record_type: type) -> _CsvLog:
        """Another CSV log in this folder, one column per field of `record_type`."""
        log = _CsvLog(self.path / name, record_type)
        self._extra_logs.append(log)
        return log

    @property
    def latest_checkpoint(self) -> Path:
        return self.checkpoints / "latest.pt"

    @property
    def best_checkpoint(self) -> Path:
        return self.checkpoints / "best.pt"

    def close(self) -> None:
        for log in (self.episodes, self.evals, self.skipped, self.losses, *self._extra_logs):
            log.close()
