"""Inference cost per observation of an exported agent: PyTorch, TorchScript and ONNX.

    python scripts/bench_export.py RUN_OR_CHECKPOINT [--batches 1 16] [--seconds 3]

Exports the agent to both formats in a temporary folder, then times each runtime on
batches of observations (the greedy graph, one thread), one after the other, and prints
microseconds per observation side by side. The first line names the CPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import a3c
from a3c.export import export_agent
from a3c.host import describe_host


def per_observation(step: Callable[[], object], batch: int, seconds: float) -> float:
    """Microseconds per observation of `step` on a batch, after a warm-up."""
    for _ in range(20):
        step()
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        step()
        calls += 1
    return 1e6 * (time.perf_counter() - started) / (calls * batch)


def timings(
    agent: a3c.agent.Agent, info: dict, script: Any, session: Any, batch: int, seconds: float
) -> list[float]:
    """Microseconds per observation of the model, the TorchScript and the ONNX graph."""
    profile = agent.profile
    if info["tensors"]["observation"]["dtype"] == "int64":  # a Discrete state's index
        observations = np.zeros(batch, dtype=np.int64)
        one_hot = agent.observation(np.eye(profile.observation_shape[0], dtype=np.float32)[0])
        model_batch = np.repeat(one_hot[None], batch, 0)
    else:
        shape = (batch, *profile.observation_shape)
        observations = model_batch = np.zeros(shape, profile.observation_dtype)
    state = agent.model.initial_state(batch)
    arrays = [observations] + ([s.numpy() for s in state] if state is not None else [])
    tensors = [torch.from_numpy(a) for a in arrays]
    feed = dict(zip(info["inputs"], arrays, strict=True))

    def eager() -> object:
        with torch.no_grad():
            return agent.model.act(torch.from_numpy(model_batch), state, greedy=True)

    def scripted() -> object:
        with torch.no_grad():
            return script(*tensors)

    runs = (eager, scripted, lambda: session.run(None, feed))
    return [per_observation(run, batch, seconds) for run in runs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a checkpoint, or a run folder (its best.pt)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(describe_host(), flush=True)
    import onnxruntime

    agent = a3c.load_agent(args.path, greedy=True)
    with tempfile.TemporaryDirectory() as folder:
        onnx_file, script_file = Path(folder) / "agent.onnx", Path(folder) / "agent.pt"
        info = export_agent(args.path, onnx_file)
        export_agent(args.path, script_file)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(onnx_file), options)
        script = torch.jit.load(str(script_file))
        print(f"{info['env']}, inputs {', '.join(info['inputs'])}; microseconds per observation")
        print("| batch | PyTorch model (a3c) | TorchScript | ONNX Runtime |")
        print("|---:|---:|---:|---:|")
        for batch in args.batches:
            costs = timings(agent, info, script, session, batch, args.seconds)
            print(f"| {batch} | " + " | ".join(f"{cost:,.1f}" for cost in costs) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
