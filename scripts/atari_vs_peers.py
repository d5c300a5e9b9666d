"""An Atari game for the same wall time: a3c's shipped preset against SB3's PPO and A2C with
rl-baselines3-zoo's Atari settings and against Sample Factory's Atari example.

    pip install -e ".[bench,plot]"
    python scripts/atari_vs_peers.py --env PongNoFrameskip-v4 --minutes 60 --out runs/pong-peers
    python scripts/atari_vs_peers.py --env BreakoutNoFrameskip-v4 --out runs/breakout \\
        --sides ppo-zoo                                      # one side again
    python scripts/atari_vs_peers.py --out runs/breakout --report --plot docs/breakout.png
    python scripts/atari_vs_peers.py --env PongNoFrameskip-v4 --out runs/pong-peers --play-only

a3c: the real `a3c-train --env ENV --workers 2` (its preset in configs/, more flags after
--), stopped with SIGTERM when the time is up. Its curve is its own evaluator's eval.csv:
whole games on the same 2 cores as its training, by the preset's rules (docs/atari.md).

ppo-zoo, a2c-zoo: SB3 built by rl-baselines3-zoo from its `atari` entry (scripts/peers.py):
`AtariWrapper`, 4 stacked frames, the zoo's n_envs and schedules over its 10 M steps. The
clock counts training only: weights are saved every --snapshot-minutes and played once the
time is up, so evaluating costs SB3 nothing while a3c's evaluator shares the cores with
a3c's training. That favours SB3. An evaluation is 10 whole games (a lost life ends no
game), actions sampled as the zoo's `enjoy.py` plays Atari agents, unclipped.

sf-appo: Sample Factory 2's `sf_examples.atari.train_atari` with that example's own
settings and `--device cpu`, in a virtual environment the script makes under --venvs, its
clock started at its first report. It saves a checkpoint every 5 minutes; once the time is
up each is played for 10 whole games, actions sampled as its `enjoy.py` plays them, at the
time it was written (agent steps: its frames / 4). What it reported while training (the
mean of its last 100 games, minutes behind its policy) is kept in reported.csv.

The sides run one after the other on a machine doing nothing else. Prints each side's
last evaluation at every 10-minute mark (up to 30 s after it) and draws the curves in one
figure.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from statistics import mean
from typing import Any

from bench_suite import evaluation_record, train_for, write_eval_csv  # same folder
from peers import (
    ZOO_SIDES,
    play_sample_factory,
    run_sample_factory,
    sample_factory_python,
    zoo_evaluate,
    zoo_experiment,
    zoo_learn,
)

from a3c.host import describe_host
from a3c.metrics import EvalRecord
from a3c.plot import plot_runs, read_csv

BIN = Path(sys.executable).parent
SIDES = ("a3c", "ppo-zoo", "a2c-zoo", "sf-appo")
REPORTED = (*SIDES, "sb3-a2c")  # sb3-a2c: the hand-built A2C of earlier runs (docs/breakout.md)
EVAL_EPISODES = 10
MARK_MINUTES = 10
# Snapshots are taken a few seconds after each 5 training minutes: without this slack a
# mark would show the snapshot 5 minutes older.
MARK_SLACK_SECONDS = 30


def run_a3c(env: str, out: Path, seconds: float, flags: list[str]) -> None:
    """The real a3c-train for `seconds` from when its run folder appears (after imports)."""
    with tempfile.TemporaryDirectory(prefix="a3c-atari-") as folder:
        runs = Path(folder)
        command = [str(BIN / "a3c-train"), "--env", env, "--workers", "2",
                   "--run-dir", str(runs), *flags]  # fmt: skip
        run = train_for(command, runs, seconds)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(run, out, ignore=shutil.ignore_patterns("checkpoints", "events.*"))


def run_zoo(side: str, env: str, out: Path, seconds: float, snapshot: float, seed: int) -> None:
    """An SB3 side in a child process, so its imports and threads stay out of this one."""
    payload = json.dumps([side, env, str(out), seconds, snapshot, seed])
    subprocess.run([sys.executable, __file__, "--zoo-child", payload], check=True)


def zoo_child(side: str, env: str, out: Path, seconds: float, snapshot: float, seed: int) -> None:
    shutil.rmtree(out, ignore_errors=True)
    (out / "snapshots").mkdir(parents=True)
    manager, model = zoo_experiment(ZOO_SIDES[side], env, seed, out / "zoo")
    saved: list[tuple[int, float]] = []

    def due(clock: float) -> bool:
        return clock >= (len(saved) + 1) * snapshot

    def save(clock: float) -> float:
        """Save a snapshot; the time saving took is taken off the clock."""
        started = time.monotonic()
        model.save(out / "snapshots" / f"{len(saved):03d}.zip")
        saved.append((int(model.num_timesteps), clock))
        print(f"{side}: {clock / 60:.1f} min, {model.num_timesteps:,} agent steps", flush=True)
        return time.monotonic() - started

    trained = zoo_learn(manager, model, seconds, due, save)
    if not saved or saved[-1][0] != model.num_timesteps:  # the last mark may have saved it
        save(trained)
    evaluate_zoo(side, manager, type(model), out, saved, seed)


def evaluate_zoo(
    side: str,
    manager: Any,
    algorithm: Any,
    out: Path,
    snapshots: list[tuple[int, float]],
    seed: int,
) -> None:
    """Play snapshot i of `out`/snapshots (taken at (step, seconds) `snapshots[i]`), an
    `algorithm` model, in evaluation envs the training run's zoo `manager` builds."""
    records = []
    for index, (step, at) in enumerate(snapshots):
        played = algorithm.load(out / "snapshots" / f"{index:03d}.zip", device="cpu")
        scores, lengths = zoo_evaluate(manager, played, EVAL_EPISODES, seed + 1_000_000)
        records.append(evaluation_record(step, at, scores, lengths))
        print(f"{side}: evaluation at {at / 60:.1f} min: {records[-1].mean:.1f}", flush=True)
    write_eval_csv(out / "eval.csv", records)


def run_sf(env: str, out: Path, seconds: float, venvs: Path, seed: int) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    run_sample_factory(env, seconds, out, venvs, seed, save_every=300)
    evaluate_sf(env, out, venvs, seed)


def evaluate_sf(env: str, out: Path, venvs: Path, seed: int) -> None:
    """Play every checkpoint the run in `out` saved, each at the time it was written.
    What Sample Factory reported while training goes to reported.csv: the mean of its
    last 100 games, which trails its policy by as many games (minutes on this machine)."""
    reports = sample_factory_reports(out / "sample-factory.log")
    write_eval_csv(out / "reported.csv", sample_factory_curve(reports))
    started = next(at for at, line in reports if SF_FRAMES.search(line))
    python = sample_factory_python(venvs)

    def evaluate(checkpoint: Path) -> EvalRecord:
        at = round(checkpoint.stat().st_mtime - started, 3)
        frames = int(checkpoint.stem.split("_")[2])
        scores, lengths = play_sample_factory(
            python, env, checkpoint, EVAL_EPISODES, seed + 1_000_000
        )
        print(f"sf-appo: evaluation at {at / 60:.1f} min: {mean(scores):.1f}", flush=True)
        return evaluation_record(frames // 4, at, scores, lengths)

    checkpoints = sorted((out / "sf-appo" / "checkpoint_p0").glob("checkpoint_*.pth"))
    with ThreadPoolExecutor(max_workers=2) as players:  # one player per core
        write_eval_csv(out / "eval.csv", list(players.map(evaluate, checkpoints)))


SF_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]")
SF_FRAMES = re.compile(r"Total num frames: (\d+)")
SF_REWARD = re.compile(r"Avg episode reward: \[\(0, '(-?[\d.]+)'\)\]")


def sample_factory_reports(log: Path) -> list[tuple[float, str]]:
    """Each stamped line of Sample Factory's log: (its time, the line)."""
    reports = []
    for line in log.read_text(errors="replace").splitlines():
        if (stamp := SF_STAMP.search(line)) is not None:
            at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            reports.append((at, line))
    return reports


def sample_factory_curve(reports: list[tuple[float, str]]) -> list[EvalRecord]:
    """Sample Factory's own reports as evaluation rows: each 'Avg episode reward' with the
    frames reported just before it (4 frames per agent step) and its time since the first
    report. It reports no spread or episode count, so those columns repeat the mean and 0."""
    records: list[EvalRecord] = []
    first = None
    frames = 0
    for at, line in reports:
        if (match := SF_FRAMES.search(line)) is not None:
            first = at if first is None else first
            frames = int(match.group(1))
        elif (match := SF_REWARD.search(line)) is not None and first is not None:
            mean = float(match.group(1))
            seconds = round(at - first, 3)
            records.append(EvalRecord(frames // 4, seconds, mean, 0.0, mean, mean, 0.0, episodes=0))
    return records


def report(out: Path, plot: Path | None) -> str:
    curves = {side: read_csv(out / side / "eval.csv") for side in REPORTED
              if (out / side / "eval.csv").exists()}  # fmt: skip
    longest = max((float(r["seconds"]) for rows in curves.values() for r in rows), default=0.0)
    lines = ["| minutes | " + " | ".join(curves) + " |", "|---:|" + "---:|" * len(curves)]
    mark = MARK_MINUTES
    while mark * 60 <= longest + 60:
        cells = []
        for rows in curves.values():
            before = [r for r in rows if float(r["seconds"]) <= mark * 60 + MARK_SLACK_SECONDS]
            cells.append(
                f"{float(before[-1]['mean']):.1f} ({int(before[-1]['step']) / 1e6:.2f} M)"
                if before
                else "none"
            )
        lines.append(f"| {mark} | " + " | ".join(cells) + " |")
        mark += MARK_MINUTES
    if plot is not None:
        plot_runs([out / side for side in curves if curves[side]], plot)
        lines.append(f"\nwrote {plot}")
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:2] == ["--zoo-child"]:
        side, env, out, seconds, snapshot, seed = json.loads(sys.argv[2])
        zoo_child(side, env, Path(out), seconds, snapshot, seed)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--minutes", type=float, default=60.0, help="wall time per side")
    parser.add_argument("--out", type=Path, default=Path("runs/atari-vs-peers"))
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--snapshot-minutes", type=float, default=5.0,
                        help="SB3: training minutes between evaluated snapshots")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="the peers' seed (a3c's: its preset's)")
    parser.add_argument("--venvs", type=Path, default=Path("runs/peers-venv"),
                        help="where sf-appo's own virtual environment is made")  # fmt: skip
    parser.add_argument("--plot", type=Path, help="PNG of the curves")
    parser.add_argument("--report", action="store_true", help="no training: table and plot")
    parser.add_argument("--play-only", action="store_true",
                        help="sf-appo: play its run's checkpoints in --out again")  # fmt: skip
    parser.add_argument("train_args", nargs="*", help="more a3c-train flags, after --")
    args = parser.parse_args()
    print(describe_host(), flush=True)
    if args.play_only:
        evaluate_sf(args.env, args.out / "sf-appo", args.venvs, args.seed)
    elif not args.report:
        seconds = args.minutes * 60
        for side in args.sides:
            if side == "a3c":
                run_a3c(args.env, args.out / side, seconds, args.train_args)
            elif side == "sf-appo":
                run_sf(args.env, args.out / side, seconds, args.venvs, args.seed)
            else:
                snapshot = args.snapshot_minutes * 60
                run_zoo(side, args.env, args.out / side, seconds, snapshot, args.seed)
    print(report(args.out, args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
