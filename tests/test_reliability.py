"""Shutdown, crashes, restarts and non-finite updates, with real processes and signals.

Faults are injected through the environment (a3c/faults.py, enabled by A3C_FAULT). After
every test no process of the run may be left; the marker that each run's processes
inherit in their environment finds them in /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers import only_run, process_group, read_csv

from a3c.checkpoint import load_checkpoint
from a3c.config import TrainConfig
from a3c.supervisor import Terminated
from a3c.trainer import Trainer

LONG_RUN = ["--env", "CartPole-v1", "--workers", "2", "--total-steps", "10000000"]
SHORT_RUN = ["--env", "CartPole-v1", "--workers", "2", "--total-steps", "6000",
             "--eval-interval", "3000", "--eval-episodes", "2"]  # fmt: skip
# A worker's batch step at which a SHORT_RUN fault fires: 320 of its 6,000 agent steps (8
# games a batch), early enough that each worker reaches it even when the other, started
# first, takes most of the budget.
EARLY_BATCH_STEP = 40


def wait_until_training(cli, run_root: Path, steps: int = 1, seconds: float = 90) -> None:
    """Until a worker has finished an episode (so training really runs)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        runs = list(run_root.iterdir()) if run_root.exists() else []
        if runs and (runs[0] / "episodes.csv").exists():
            rows = read_csv(runs[0] / "episodes.csv")
            if rows and int(rows[-1]["step"]) >= steps:
                return
        time.sleep(0.2)
    raise AssertionError("training did not start")


def finish(process: subprocess.Popen[str], seconds: float = 60) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=seconds)
    return process.returncode, out, err


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)],
)
def test_interrupt_saves_and_exits_cleanly(cli, tmp_path: Path, sig, code) -> None:
    process = cli.start("a3c-train", *LONG_RUN, "--run-dir", str(tmp_path))
    wait_until_training(cli, tmp_path, steps=2000)
    sent = time.monotonic()
    process.send_signal(sig)
    returncode, out, err = finish(process)
    assert returncode == code, err
    assert time.monotonic() - sent < 15
    assert cli.wait_for_no_leftovers() == []
    assert "Traceback" not in err
    run = only_run(tmp_path)
    latest = load_checkpoint(run / "checkpoints" / "latest.pt")
    assert latest["step"] >= 2000
    assert "done:" in out


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["budget", "SIGINT", "SIGTERM"])
def test_no_process_of_the_run_outlives_a3c_train(cli, tmp_path: Path, ending: str) -> None:
    """The moment a3c-train returns, its process group is empty: the fork server and the
    resource tracker have exited and been reaped (left alone, they stayed in the group as
    unreaped zombies for about a second), which torchrun and job schedulers rely on."""
    if ending == "budget":
        process = cli.start("a3c-train", *SHORT_RUN, "--run-dir", str(tmp_path), own_group=True)
    else:
        process = cli.start("a3c-train", *LONG_RUN, "--run-dir", str(tmp_path), own_group=True)
        wait_until_training(cli, tmp_path)
        process.send_signal(getattr(signal, ending))
    returncode, _, err = finish(process, seconds=120)
    assert process_group(process.pid) == []
    assert returncode == {"budget": 0, "SIGINT": 130, "SIGTERM": 143}[ending], err
    assert "leaked" not in err, err


@pytest.mark.slow
def test_a_second_interrupt_quits_at_once(cli, tmp_path: Path) -> None:
    process = cli.start("a3c-train", *LONG_RUN, "--run-dir", str(tmp_path))
    wait_until_training(cli, tmp_path)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    returncode, _, err = finish(process, seconds=15)
    # 130 from our handler, or death by SIGINT itself (a shell shows 130 for both) when the
    # second signal lands after the interpreter has begun to exit.
    assert returncode in (130, -signal.SIGINT), err
    assert time.monotonic() - sent < 5
    assert cli.wait_for_no_leftovers() == []


def test_a_crashed_worker_is_reported_and_restarted(cli, tmp_path: Path) -> None:
    cli.env["A3C_FAULT"] = f"raise:a3c-worker-1:{EARLY_BATCH_STEP}:{tmp_path / 'fired'}"
    result = cli.run("a3c-train", *SHORT_RUN, "--run-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    assert "a3c-worker-1 failed" in result.stderr and "InjectedFault" in result.stderr
    assert "restarting it from the shared weights" in result.stderr
    assert "1 process restarts" in result.stdout
    errors = (only_run(tmp_path / "runs") / "errors.log").read_text()
    assert "a3c-worker-1 failed" in errors and "Traceback" in errors
    assert cli.wait_for_no_leftovers() == []


@pytest.mark.slow
def test_a_crashed_evaluator_is_restarted(cli, tmp_path: Path) -> None:
    cli.env["A3C_FAULT"] = f"raise:a3c-evaluator:10:{tmp_path / 'fired'}"
    result = cli.run("a3c-train", *SHORT_RUN, "--run-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    assert "a3c-evaluator failed" in result.stderr
    evals = read_csv(only_run(tmp_path / "runs") / "eval.csv")
    assert evals, "the restarted evaluator still evaluates"
    assert cli.wait_for_no_leftovers() == []


@pytest.mark.slow
def test_repeated_crashes_stop_training_with_exit_code_1(cli, tmp_path: Path) -> None:
    cli.env["A3C_FAULT"] = "raise:a3c-worker-0:50"
    result = cli.run("a3c-train", *LONG_RUN, "--max-restarts", "2", "--run-dir", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert "training failed: a3c-worker-0 exited with code 1, after 2 restarts" in result.stderr
    assert (only_run(tmp_path) / "checkpoints" / "latest.pt").is_file()
    assert cli.wait_for_no_leftovers() == []


@pytest.mark.slow
def test_a_worker_killed_by_a_signal_is_restarted(cli, tmp_path: Path) -> None:
    process = cli.start("a3c-train", *SHORT_RUN[:-4], "--total-steps", "30000",
                        "--run-dir", str(tmp_path))  # fmt: skip
    wait_until_training(cli, tmp_path)
    os.kill(cli.wait_for_process("a3c-worker-0"), signal.SIGKILL)
    returncode, out, err = finish(process, seconds=300)
    assert returncode == 0, err
    assert "a3c-worker-0 was killed by signal 9; restarting it" in err
    assert "1 process restarts" in out
    assert cli.wait_for_no_leftovers() == []


def test_children_exit_when_the_main_process_is_killed(cli, tmp_path: Path) -> None:
    process = cli.start("a3c-train", *LONG_RUN, "--run-dir", str(tmp_path))
    wait_until_training(cli, tmp_path)
    assert cli.wait_for_process("a3c-evaluator")
    process.kill()
    process.communicate(timeout=30)
    assert cli.wait_for_no_leftovers(seconds=10) == []


@pytest.mark.slow
def test_a_nan_update_is_skipped_and_logged(cli, tmp_path: Path) -> None:
    cli.env["A3C_FAULT"] = f"nan:a3c-worker-0:{EARLY_BATCH_STEP}:{tmp_path / 'fired'}"
    result = cli.run("a3c-train", *SHORT_RUN, "--run-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    assert "skipped an update" in result.stderr and "non-finite loss" in result.stderr
    run = only_run(tmp_path / "runs")
    assert len(read_csv(run / "skipped_updates.csv")) == 1
    weights = load_checkpoint(run / "checkpoints" / "latest.pt")["model"]
    assert all(torch.isfinite(w).all() for w in weights.values())


@pytest.mark.slow
def test_nan_updates_in_a_row_stop_training_and_keep_good_weights(cli, tmp_path: Path) -> None:
    cli.env["A3C_FAULT"] = "nan:a3c-worker-1:200"
    result = cli.run("a3c-train", *LONG_RUN, "--max-nonfinite-updates", "3",
                     "--run-dir", str(tmp_path))  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "3 updates in a row had a non-finite loss" in result.stderr
    weights = load_checkpoint(only_run(tmp_path) / "checkpoints" / "latest.pt")["model"]
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert cli.wait_for_no_leftovers() == []


def test_an_unwritable_run_folder_is_reported_before_any_worker_starts(cli) -> None:
    result = cli.run("a3c-train", *LONG_RUN, "--run-dir", "/proc/a3c-runs")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "cannot write the run folder under /proc/a3c-runs" in result.stderr
    assert cli.leftovers() == []


@pytest.fixture
def tiny_filesystem(tmp_path: Path):
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount_point)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=False)


def test_a_full_run_folder_is_reported_before_any_worker_starts(cli, tiny_filesystem) -> None:
    result = cli.run("a3c-train", *LONG_RUN, "--hidden-size", "512",
                     "--run-dir", str(tiny_filesystem))  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "No space left on device" in result.stderr
    assert cli.leftovers() == []


def test_a_signal_in_a_parallel_run_waits_for_the_pipe_read(tmp_path: Path) -> None:
    """SIGTERM while the main process reads its children's pipes: the read completes, and
    the main loop raises afterwards. Raised inside the read, it once left half a message in
    the pipe, and the shutdown's drain crashed on the rest instead of saving latest.pt."""
    config = TrainConfig(env="CartPole-v1", workers=1, run_dir=str(tmp_path))
    trainer = Trainer(config, quiet=True)
    supervisor = trainer.supervisor
    try:
        with supervisor.signals.handled(serial=False):
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            started = time.monotonic()
            supervisor.drain(timeout=1.0)
            assert time.monotonic() - started >= 0.9  # the read ran to its end
            with pytest.raises(Terminated):
                supervisor.signals.raise_if_signalled()
    finally:
        trainer.reporter.close()
