"""What a meeting of the nodes costs: measured on loopback, then computed for real networks.

    python scripts/bench_meeting.py
    python scripts/bench_meeting.py --env CartPole-v1 PongNoFrameskip-v4 --meetings 50

Starts two processes on 127.0.0.1 that join a gloo group as two nodes would, builds each
env's preset model in shared memory, and times `NodeGroup.meet` (the step counts, the
weights' change and the statistics, with the update locks held) over --meetings
meetings. It prints the measured time and the bytes each node sends, then a table
computed from those bytes, not measured: a ring all-reduce, which sends each node
2 (N - 1) / N times the bytes and takes 2 (N - 1) steps, at 1 and 10 Gbit/s with --latency
per step, plus the loopback time as the fixed local cost. From that: the share of wall time
meetings take at the default --sync-interval, and the interval at which they take 5 %.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from typing import Any

import torch
import torch.multiprocessing as mp

from a3c.config import TrainConfig
from a3c.distributed import Node, NodeGroup
from a3c.envs import EnvRecipe, describe_env
from a3c.host import describe_host
from a3c.model import build_model
from a3c.presets import find_preset, load_toml
from a3c.sharing import SharedObjects

NODES = (2, 4, 8, 16, 32, 64)
GBITS = (1, 10)
SHARE = 0.05


def _config(env_id: str) -> TrainConfig:
    preset = find_preset(env_id)
    config = TrainConfig(env=env_id)
    return config.replace(load_toml(preset)) if preset is not None else config


def _node(rank: int, port: int, env_ids: list[str], meetings: int, results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    group = NodeGroup(Node(rank, 2, "bench", restarts=0), timeout_s=60)
    for env_id in env_ids:
        config = _config(env_id)
        profile = describe_env(EnvRecipe.of(config))
        model = build_model(config, profile)
        model.share_memory()
        shared = SharedObjects.create(
            model,
            torch.optim.SGD(model.parameters(), lr=0.0),
            profile,
            messages=None,
            workers=config.workers or 1,
            update_locks=True,
        )
        group.start(model, 0)
        times, sent = [], 0
        for _ in range(meetings):
            with torch.no_grad():  # a change to combine, as training would leave
                for parameter in model.parameters():
                    parameter.add_(torch.randn_like(parameter), alpha=1e-3)
            shared.add_steps(100)
            started = time.perf_counter()
            meeting = group.meet(shared, stop=False)
            times.append(time.perf_counter() - started)
            sent = meeting.bytes
        if rank == 0:
            parameters = sum(p.numel() for p in model.parameters())
            results.put((env_id, parameters, sent, statistics.median(times), min(times)))
    group.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", nargs="+", default=["CartPole-v1", "PongNoFrameskip-v4"])
    parser.add_argument("--meetings", type=int, default=30)
    parser.add_argument("--latency", type=float, default=100e-6, help="seconds per ring step")
    parser.add_argument("--sync-interval", type=float, default=TrainConfig.sync_interval)
    args = parser.parse_args()
    print(describe_host(), flush=True)
    context = mp.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    nodes = [
        context.Process(target=_node, args=(rank, port, args.env, args.meetings, results))
        for rank in (0, 1)
    ]
    for process in nodes:
        process.start()
    measured = [results.get(timeout=600) for _ in args.env]
    for process in nodes:
        process.join()

    print(f"measured on loopback, 2 processes, {args.meetings} meetings each:")
    print("| env | parameters | bytes sent per node | meeting, median | fastest |")
    print("|---|---:|---:|---:|---:|")
    for env_id, parameters, sent, median, fastest in measured:
        print(f"| {env_id} | {parameters:,} | {sent:,} | {median * 1e3:.2f} ms | "
              f"{fastest * 1e3:.2f} ms |")  # fmt: skip

    print(f"\ncomputed, not measured: ring all-reduce, {args.latency * 1e6:.0f} µs per step, "
          f"plus the loopback median; share of wall time at --sync-interval "
          f"{args.sync_interval:g} s, and the interval for {SHARE:.0%}")  # fmt: skip
    header = " | ".join(f"{n} nodes" for n in NODES)
    print(f"| env | link | {header} |")
    print("|---|---|" + "---:|" * len(NODES))
    for env_id, _, sent, median, _ in measured:
        for gbit in GBITS:
            cells = []
            for n in NODES:
                transfer = 2 * (n - 1) / n * sent * 8 / (gbit * 1e9)
                seconds = median + transfer + 2 * (n - 1) * args.latency
                share = seconds / args.sync_interval
                cells.append(f"{seconds * 1e3:.1f} ms, {share:.2%}, {seconds / SHARE:.2f} s")
            print(f"| {env_id} | {gbit} Gbit/s | " + " | ".join(cells) + " |")
    print("\neach cell: one meeting; its share of wall time; the sync interval for 5 %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
