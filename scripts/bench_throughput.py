"""Training throughput against the emulator's own limit, measured side by side in one run.

For one environment, worker count, envs per worker and rollout length it measures, one
after the other:

(a) env only: as many processes as workers, each stepping its K environments with random
    actions through the same `EnvBatch` a worker uses: the most agent steps/s these cores
    can give. Atari ids are measured on both paths, gymnasium's wrappers stepped in a
    Python loop and ale-py's C++ `AtariVectorEnv` (the one workers use);
(b) training: the real trainer with the same settings, its global step counter sampled
    after a warm-up, without evaluations, and again with the preset's evaluations running
    (the difference is what evaluating costs), and each worker's RSS and PSS at the end;
(c) where one worker's time goes per agent step: environment, rollout (forward passes,
    the encoder's recorded by autograd), loss (the core and heads scored over the whole
    rollout), backward pass and gradient hand-off, optimiser step.

    python scripts/bench_throughput.py --env PongNoFrameskip-v4 --workers 2
    python scripts/bench_throughput.py --workers 1 2 4 16 --envs-per-worker 1 4 8
    python scripts/bench_throughput.py --envs-per-worker 8 16 --t-max 20 10
    python scripts/bench_throughput.py --training-only --eval-seconds 180
    python scripts/bench_throughput.py --training-only --precision float32 bfloat16 float32

Settings are the env's shipped preset; --envs-per-worker and --t-max default to the preset's,
--precision (the frame encoder's arithmetic, measured in the order given) to a3c's default.
--training-only measures (b) with evaluations alone, through nothing but `Trainer`: it also
runs against an older a3c (PYTHONPATH=<its checkout>), for before/after comparisons.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import tempfile
import threading
import time
from typing import Any

import numpy as np
import torch
from measure_memory import rss_and_pss_kib  # a sibling script: scripts/ is on sys.path

from a3c.config import TrainConfig
from a3c.trainer import Trainer

try:
    from a3c.host import describe_host
    from a3c.presets import find_preset, load_toml
except ImportError:  # an a3c from before presets and host facts had modules of their own
    from a3c.config import find_preset, load_toml  # type: ignore[attr-defined,no-redef]

    def describe_host() -> str:
        return "CPU: not named by this a3c (run the script from a newer one to see it)"


PATHS = ("gymnasium", "vector")


# Imported where used, not above: --training-only runs against older a3c versions too.
def _batch(config: TrainConfig, path: str) -> Any:
    from a3c.batches import GymEnvBatch, make_env_batch
    from a3c.envs import EnvRecipe, describe_env, make_env

    recipe = EnvRecipe.of(config)
    profile = describe_env(recipe)
    if path == "vector":
        return make_env_batch(recipe, profile, config.envs_per_worker, config.workers, "bench")
    return GymEnvBatch([make_env(recipe) for _ in range(config.envs_per_worker)], profile)


def _step_randomly(config: TrainConfig, path: str, seconds: float, out: Any) -> None:
    batch = _batch(config, path)
    count, info = config.envs_per_worker, batch.profile
    batch.reset(list(range(count)))
    rng = np.random.default_rng(0)
    steps, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        if info.continuous:
            actions = rng.uniform(-1.0, 1.0, (count, *info.action_shape)).astype(np.float32)
        else:
            actions = rng.integers(0, info.n_actions, count)
        batch.step(actions)
        steps += count
    batch.close()
    out.put(steps / seconds)


def env_only(config: TrainConfig, seconds: float, path: str) -> float:
    # Not the forkserver: started here, it would lack the preloads the trainer gives it,
    # and every worker would then hold its own copy of torch (a larger PSS than a3c-train's).
    context = mp.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=_step_randomly, args=(config, path, seconds, results))
        for _ in range(max(config.workers, 1))
    ]
    for process in processes:
        process.start()
    rates = [results.get() for _ in processes]
    for process in processes:
        process.join()
    return float(sum(rates))


def training(config: TrainConfig, seconds: float, warmup: float) -> tuple[float, float, float]:
    """Agent steps/s after the warm-up, and one worker's mean RSS and PSS in MiB at the end."""
    trainer = Trainer(config, quiet=True)
    samples: list[tuple[float, int]] = []
    memory: list[tuple[int, int]] = []

    def watch() -> None:
        while trainer.shared.steps_done == 0 and not trainer.shared.stop.is_set():
            time.sleep(0.05)
        time.sleep(warmup)
        samples.append((time.monotonic(), trainer.shared.steps_done))
        time.sleep(seconds)
        samples.append((time.monotonic(), trainer.shared.steps_done))
        # Before round 3 the trainer held its children itself.
        for child in getattr(trainer, "supervisor", trainer).children:
            if child.name.startswith("a3c-worker") and child.process is not None:
                memory.append(rss_and_pss_kib(child.process.pid))
        trainer.shared.stop.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    trainer.run()
    watcher.join()
    (t0, n0), (t1, n1) = samples
    rss, pss = (sum(m[i] for m in memory) / len(memory) / 1024 if memory else 0.0 for i in (0, 1))
    return (n1 - n0) / (t1 - t0), rss, pss


class _TimedBatch:
    """An env batch whose steps add their time to `clock["env"]`."""

    def __init__(self, batch: Any, clock: dict[str, float]) -> None:
        self.batch, self.clock = batch, clock
        self.profile = batch.profile

    def step(self, actions: Any) -> Any:
        started = time.perf_counter()
        result = self.batch.step(actions)
        self.clock["env"] += time.perf_counter() - started
        return result

    def close(self) -> None:
        self.batch.close()


def time_split(config: TrainConfig, updates: int) -> dict[str, float]:
    """Milliseconds per agent step in one serial worker, by part."""
    from a3c.envs import EnvRecipe, describe_env
    from a3c.loss import apply_gradients
    from a3c.model import build_model
    from a3c.optim import make_shared_optimizer
    from a3c.sharing import LocalInbox, SharedObjects
    from a3c.worker import Worker

    torch.set_num_threads(1)
    profile = describe_env(EnvRecipe.of(config))
    model = build_model(config, profile)
    model.share_memory()
    optimizer = make_shared_optimizer(
        config.optimizer, model.parameters(), config.learning_rate, config.optimizer_eps,
        config.rmsprop_alpha,
    )  # fmt: skip
    shared = SharedObjects.create(model, optimizer, profile, LocalInbox(), workers=0)
    worker = Worker(0, config, shared)
    clock = dict.fromkeys(("env", "rollout", "loss", "backward", "optimiser"), 0.0)
    worker.envs = _TimedBatch(worker.envs, clock)  # type: ignore[assignment]
    optimizer.register_step_pre_hook(lambda *_: clock.__setitem__("_step", time.perf_counter()))
    optimizer.register_step_post_hook(
        lambda *_: clock.__setitem__(
            "optimiser", clock["optimiser"] + time.perf_counter() - clock["_step"]
        )
    )
    steps = 0
    for update in range(updates + 3):
        if update == 3:  # warm-up excluded
            clock.update(dict.fromkeys(clock, 0.0))
            steps = 0
        started = time.perf_counter()
        rollout = worker.collect_rollout()
        collected = time.perf_counter()
        loss = worker.loss(rollout).total
        computed = time.perf_counter()
        apply_gradients(worker.model, model, optimizer, loss, config.max_grad_norm)
        done = time.perf_counter()
        clock["rollout"] += collected - started
        clock["loss"] += computed - collected
        clock["backward"] += done - computed
        steps += len(rollout)
    worker.close()
    clock["rollout"] -= clock["env"]  # the forward passes and bookkeeping of the rollout
    clock["backward"] -= clock["optimiser"]
    clock.pop("_step", None)
    return {part: 1000 * seconds / steps for part, seconds in clock.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="PongNoFrameskip-v4")
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--envs-per-worker", type=int, nargs="+")
    parser.add_argument("--t-max", type=int, nargs="+")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--eval-seconds",
        type=float,
        default=180.0,
        help="the measurement with evaluations: long enough to take in several of them",
    )
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--split-updates", type=int, default=20)
    parser.add_argument("--training-only", action="store_true")
    parser.add_argument("--precision", nargs="+", choices=("auto", "bfloat16", "float32"))
    args = parser.parse_args()
    print(describe_host(), flush=True)

    preset = find_preset(args.env)
    base = TrainConfig(env=args.env)
    if preset is not None:
        base = base.replace(load_toml(preset))
    from a3c.profile import ATARI, family_of

    paths = PATHS if family_of(args.env) is ATARI else PATHS[:1]
    rows = []
    # One serial worker: the same for any worker count.
    splits: dict[tuple[int, int, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as run_dir:
        for workers in args.workers:
            for envs, t_max, precision in itertools.product(
                args.envs_per_worker or [base.envs_per_worker],
                args.t_max or [base.t_max],
                args.precision or [None],  # None: left out, for older a3c without the setting
            ):
                evaluating = base.replace(
                    {"workers": workers, "envs_per_worker": envs, "t_max": t_max,
                     "run_dir": run_dir, "checkpoint_interval": 10**12, "total_steps": 10**12}
                    | ({"precision": precision} if precision else {}),
                )  # fmt: skip
                config = evaluating.replace({"eval_interval": 10**12})
                arithmetic = precision or "default"
                if args.training_only:
                    rate, _, _ = training(evaluating, args.eval_seconds, args.warmup)
                    print(f"workers {workers}  envs/worker {envs}  t_max {t_max}  precision "
                          f"{arithmetic}  training with evaluations {rate:7.0f}/s",
                          flush=True)  # fmt: skip
                    continue
                env_rates = [env_only(config, args.seconds, path) for path in paths]
                train_rate, rss, pss = training(config, args.seconds, args.warmup)
                evaluated_rate, _, _ = training(evaluating, args.eval_seconds, args.warmup)
                if (envs, t_max, arithmetic) not in splits:
                    splits[envs, t_max, arithmetic] = time_split(config, args.split_updates)
                rows.append(
                    (workers, envs, t_max, arithmetic, env_rates, train_rate, evaluated_rate,
                     rss, pss)
                )  # fmt: skip
                print(
                    f"workers {workers:>2}  envs/worker {envs:>2}  t_max {t_max:>2}  "
                    f"precision {arithmetic}  env-only "
                    + ", ".join(f"{p} {r:7.0f}/s" for p, r in zip(paths, env_rates, strict=True))
                    + f"  training {train_rate:7.0f}/s, with evaluations {evaluated_rate:7.0f}/s"
                    f"  worker RSS {rss:.0f} MiB, PSS {pss:.0f} MiB",
                    flush=True,
                )
    if args.training_only:
        return 0

    print(f"\n{args.env}, preset {preset.name if preset else 'none'}; env-only by path, "
          "training through the path workers use; ratio: training without evaluations over "
          "the fastest env-only")  # fmt: skip
    print("| workers | envs/worker | t_max | precision | "
          + " | ".join(f"env-only {p}, steps/s" for p in paths)
          + " | training, steps/s | with evaluations, steps/s | ratio "
          "| RSS per worker, MiB | PSS per worker, MiB |")  # fmt: skip
    print("|---:|---:|---:|---|" + "---:|" * (len(paths) + 5))
    for workers, envs, t_max, arithmetic, env_rates, train_rate, evaluated_rate, rss, pss in rows:
        print(f"| {workers} | {envs} | {t_max} | {arithmetic} | "
              + " | ".join(f"{r:,.0f}" for r in env_rates)
              + f" | {train_rate:,.0f} | {evaluated_rate:,.0f} | "
              f"{train_rate / max(env_rates):.2f} | {rss:.0f} | {pss:.0f} |")  # fmt: skip
    print("\nms per agent step in one worker (serial, one core):")
    parts = list(next(iter(splits.values())))
    print("| envs/worker | t_max | precision | " + " | ".join(parts) + " | total |")
    print("|---:|---:|---|" + "---:|" * (len(parts) + 1))
    for (envs, t_max, arithmetic), split in splits.items():
        total = sum(split.values())
        cells = " | ".join(f"{split[p]:.3f}" for p in parts)
        print(f"| {envs} | {t_max} | {arithmetic} | {cells} | {total:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
