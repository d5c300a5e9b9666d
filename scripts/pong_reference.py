"""The Pong reference run: train PongNoFrameskip-v4 with the shipped preset for up to an hour.

    python scripts/pong_reference.py --minutes 60 --workers 2

Runs the real `a3c-train` and stops it with SIGTERM when the time is up. a3c-train handles it
like Ctrl-C: it writes its final checkpoint and logs. Not SIGINT, which a shell's background
job starts with ignored, so the run would go on. Then prints evaluation score against
minutes and agent steps as a Markdown table, a one-line summary (when the evaluation mean first
reached --target, and the mean evaluation over the --window minutes), and draws the curve with
a3c-plot (needs the `plot` extra).

    python scripts/pong_reference.py --compare RUN_A RUN_B RUN_C

summarises finished runs side by side, one row each, without training. Hogwild runs of one
preset differ by minutes in when they learn, so presets are compared over several runs made
in one session, alternating (A, B, A), on a machine doing nothing else.

    python scripts/pong_reference.py --minutes 30 --runs 5 --window 20 30 --run-dir runs/pong5
    python scripts/pong_reference.py --minutes 30 --nodes 2 --workers 1 --run-dir runs/nodes2

--runs makes several runs one after another and ends with how they spread: the median
time and steps to --target, the slowest run's steps against the median's, and how many
held --target over the window. --nodes starts that many local torchrun agents, one per
node as each machine would start its own, each with --workers workers; node 0 evaluates,
so its run folder is the run's. When the time is up node 0's a3c-train gets SIGTERM,
which stops the group on the same weights; torchrun then reports that node as failed
(exit code 143) and the other agents lose its store: that is the stop, not a fault.
The first line names the CPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_cartpole import first_reaching  # same folder

from a3c.host import describe_host
from a3c.plot import read_csv

ENV = "PongNoFrameskip-v4"
BIN = Path(sys.executable).parent
# What the nodes' a3c-train get after the group was told to stop: a meeting, then each
# saves its checkpoint. torchrun's agents then wait 300 s at their exit barrier for the
# interrupted node's agent (docs/distributed.md), so they are ended once a3c is done.
GROUP_STOP_SECONDS = 120


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2, help="workers per node")
    parser.add_argument("--nodes", type=int, default=1, help="local torchrun nodes")
    parser.add_argument("--runs", type=int, default=1, help="runs one after another")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/reference"))
    parser.add_argument("--plot", type=Path, default=Path("docs/pong_reference.png"))
    parser.add_argument("--target", type=float, default=18.0, help="score the summary times")
    parser.add_argument("--window", type=float, nargs=2, default=(20.0, 40.0),
                        metavar=("FROM", "TO"), help="minutes the mean spans")  # fmt: skip
    parser.add_argument("--compare", type=Path, nargs="+", metavar="RUN",
                        help="summarise these finished run folders; no training")  # fmt: skip
    parser.add_argument("train_args", nargs="*", help="more a3c-train flags, after --")
    args = parser.parse_args()
    for name in ("minutes", "workers", "nodes", "runs"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    print(describe_host(), flush=True)
    if args.compare:
        print(summary_table(args.compare, args.target, args.window))
        print(spread(args.compare, args.target, args.window))
        return 0

    runs = []
    for number in range(1, args.runs + 1):
        if args.runs > 1:
            print(f"\nrun {number} of {args.runs}", flush=True)
        started = time.monotonic()
        train_args = ["--env", ENV, "--workers", str(args.workers),
                      "--run-dir", str(args.run_dir), *args.train_args]  # fmt: skip
        if args.nodes == 1:
            train_alone(train_args, args.minutes * 60)
        else:
            train_on_nodes(train_args, args.nodes, args.minutes * 60)
        print(f"a3c-train ended after {(time.monotonic() - started) / 60:.1f} minutes")
        runs.append(newest_run(args.run_dir))
        print(evaluation_table(runs[-1]))

    print("\n" + summary_table(runs, args.target, args.window))
    if len(runs) > 1:
        print(spread(runs, args.target, args.window))
    subprocess.run([str(BIN / "a3c-plot"), *map(str, runs), "-o", str(args.plot)], check=False)
    return 0


def train_alone(train_args: list[str], seconds: float) -> None:
    """a3c-train for `seconds`, then SIGTERM, which it handles like Ctrl-C (see above)."""
    process = subprocess.Popen([str(BIN / "a3c-train"), *train_args])
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        process.wait()


def train_on_nodes(train_args: list[str], nodes: int, seconds: float) -> None:
    """One torchrun agent per node on this machine, for `seconds`; then node 0's a3c-train
    gets SIGTERM, which stops the whole group on the same weights."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launch = [str(BIN / "torchrun"), "--nnodes", str(nodes), "--nproc-per-node", "1",
              "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--rdzv-id", f"pong-{port}", str(BIN / "a3c-train"), *train_args]  # fmt: skip
    agents = []
    for _ in range(nodes):
        agents.append(subprocess.Popen(launch))
        if len(agents) == 1:
            time.sleep(2)  # the first agent hosts the rendezvous; the others join it
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and all(agent.poll() is None for agent in agents):
        time.sleep(1)
    leader = trainer_of(agents[0])
    if leader is not None:
        os.kill(leader, signal.SIGTERM)
    ended = time.monotonic() + GROUP_STOP_SECONDS
    for agent in agents:
        trainer = trainer_of(agent)
        while trainer is not None and pid_alive(trainer) and time.monotonic() < ended:
            time.sleep(1)
        if agent.poll() is None:
            agent.kill()
        agent.wait()


def trainer_of(agent: subprocess.Popen[bytes]) -> int | None:
    """PID of the a3c-train that torchrun `agent` started (Linux's /proc), if it runs."""
    try:
        children = Path(f"/proc/{agent.pid}/task/{agent.pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def newest_run(run_dir: Path) -> Path:
    """The run folder a3c-train made last (node 0's, where there are several nodes)."""
    folders = [p for p in run_dir.glob(f"{ENV}-*") if "-node" not in p.name]
    return max(folders, key=lambda p: p.stat().st_mtime)


def evaluation_table(run: Path) -> str:
    lines = [f"\n{run}", "| minutes | agent steps | evaluation mean ± std | min | max |",
             "|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in read_csv(run / "eval.csv"):
        lines.append(f"| {float(row['seconds']) / 60:.1f} | {int(row['step']):,} | "
                     f"{float(row['mean']):.1f} ± {float(row['std']):.1f} | "
                     f"{float(row['min']):g} | {float(row['max']):g} |")  # fmt: skip
    return "\n".join(lines)


def window_mean(rows: list[dict[str, str]], window: tuple[float, float]) -> tuple[float, int]:
    start, end = window
    inside = [float(r["mean"]) for r in rows if start <= float(r["seconds"]) / 60 <= end]
    return (statistics.fmean(inside) if inside else float("nan")), len(inside)


def summary_table(runs: list[Path], target: float, window: tuple[float, float]) -> str:
    start, end = window
    lines = [
        f"| run | agent steps/s | first mean ≥ {target:g} | after it | "
        f"mean, minutes {start:g} to {end:g} | last |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        rows = read_csv(run / "eval.csv")
        if not rows:
            lines.append(f"| {run} | no evaluations yet | | | | |")
            continue
        minutes = [float(row["seconds"]) / 60 for row in rows]
        steps = [int(row["step"]) for row in rows]
        means = [float(row["mean"]) for row in rows]
        # Steps per second up to the last evaluation: the whole run's pace, evaluations included.
        rate = steps[-1] / (minutes[-1] * 60)
        reached = next((i for i, mean in enumerate(means) if mean >= target), None)
        if reached is None:
            first, after = "not reached", ""
        else:
            first = (f"{minutes[reached]:.1f} min, {steps[reached] / 1e6:.2f} M "
                     f"({means[reached]:.1f})")  # fmt: skip
            later = means[reached + 1 :]
            after = f"{min(later):.1f} to {max(later):.1f} ({len(later)})" if later else "none"
        in_window, count = window_mean(rows, window)
        lines.append(
            f"| {run} | {rate:,.0f} | {first} | {after} | {in_window:.1f} ({count}) | "
            f"{means[-1]:.1f} at {minutes[-1]:.1f} min |"
        )
    return "\n".join(lines)


def spread(runs: list[Path], target: float, window: tuple[float, float]) -> str:
    """How alike the runs learned: what a user starting the preset once may expect."""
    reached_at = []  # (minutes, agent steps) of each run's first evaluation ≥ target
    held = 0
    for run in runs:
        reached = first_reaching(run / "eval.csv", target)
        if reached is not None:
            step, seconds, _ = reached
            reached_at.append((seconds / 60, step))
        held += window_mean(read_csv(run / "eval.csv"), window)[0] >= target
    lines = [f"reached {target:g}: {len(reached_at)} of {len(runs)} runs; held it over "
             f"minutes {window[0]:g} to {window[1]:g}: {held} of {len(runs)}"]  # fmt: skip
    if len(reached_at) == len(runs):
        minutes = statistics.median(m for m, _ in reached_at)
        steps = statistics.median(s for _, s in reached_at)
        slowest = max(s for _, s in reached_at)
        lines.append(f"median {minutes:.1f} minutes and {steps / 1e6:.2f} M agent steps to "
                     f"{target:g}; the slowest run took {slowest / steps:.2f} times the "
                     "median's steps")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
