"""The run folder and the records that workers and the evaluator send to the main process."""

from __future__ import annotations

import csv
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Any

from a3c.config import TrainConfig, to_toml
from a3c.errors import UsageError


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


class _CsvLog:
    """Append-only CSV with a header, flushed per row so a crash loses nothing written."""

    def __init__(self, path: Path, record_type: type) -> None:
        self.columns = [f.name for f in fields(record_type)]
        new = not path.exists() or path.stat().st_size == 0
        self._file: IO[str] = path.open("a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=self.columns)
        if new:
            self._writer.writeheader()
            self._file.flush()

    def write(self, record: Any) -> None:
        self._writer.writerow(asdict(record))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class RunDirectory:
    """``<run_dir>/<env>-<yyyymmdd-hhmmss>/`` with config.toml, the CSV logs and checkpoints/."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkpoints = path / "checkpoints"
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        self.episodes = _CsvLog(path / "episodes.csv", EpisodeRecord)
        self.evals = _CsvLog(path / "eval.csv", EvalRecord)

    @classmethod
    def create(cls, config: TrainConfig) -> RunDirectory:
        """A new, uniquely named run folder, with the config written into it."""
        parent = Path(config.run_dir)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = f"{config.env.replace('/', '-')}-{stamp}"
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
            return cls(path)
        except OSError as error:
            raise UsageError(f"cannot write the run folder under {parent}: {error}") from None

    @property
    def latest_checkpoint(self) -> Path:
        return self.checkpoints / "latest.pt"

    @property
    def best_checkpoint(self) -> Path:
        return self.checkpoints / "best.pt"

    def close(self) -> None:
        self.episodes.close()
        self.evals.close()
