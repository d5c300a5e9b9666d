"""a3c against its peers on the vector environments, for the same wall time on the same cores.

    pip install -e ".[bench,box2d]"
    python scripts/bench_suite.py --envs CartPole-v1 --minutes 1 --preset \
        --sides a3c a3c-no-preset ppo-zoo a2c-zoo          # docs/peers.md
    python scripts/bench_suite.py --envs CartPole-v1 --seeds 1 2 3 4 5 --minutes 2
    python scripts/bench_suite.py --sides a3c --envs LunarLander-v3 -- --lr 3e-4
    python scripts/bench_suite.py --report runs/suite/results.jsonl
    python scripts/bench_suite.py --envs Pendulum-v1 InvertedPendulum-v5 --preset   # continuous

Sides, run one after the other for each environment and seed, their order rotating from
seed to seed:
- `a3c`: the real `a3c-train --env ENV --no-preset --seed S` (2 workers on a 2-core
  machine by its default; no other flag unless given after --). With --preset, the env's
  shipped preset instead of --no-preset: what `a3c-train --env ENV` with no flag runs.
- `a3c-no-preset`: the same with --no-preset always, to check a preset against the
  built-in defaults in one run.
- `ppo-zoo`, `a2c-zoo`: Stable-Baselines3's PPO and A2C with rl-baselines3-zoo's tuned
  settings for the env, built by the zoo itself (scripts/peers.py).
- `sb3-a2c`: SB3's A2C with its defaults (MlpPolicy, 8 environments).

Each side gets the same wall time counted the same way: from after the imports,
evaluations included. a3c evaluates in its own process every 10,000 agent steps (its
default); SB3 is paused every 10,000 steps for 10 episodes by its rules
(greedy; the zoo's with its observation statistics). At the end each side's final weights
play the final evaluation (10 episodes, or --final-episodes; 100 for FrozenLake, whose
score is a success rate). Every result is appended to --out as one JSON line, so a long
suite can run in parts and be summarised with --report. With --curves DIR, each run's
evaluations land in DIR/ENV/SIDE-seedS/eval.csv (a3c's run folder logs, and SB3's
evaluations in the same columns), so `a3c-plot` draws the sides in one figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from peers import ZOO_SIDES, zoo_evaluate, zoo_experiment, zoo_learn  # same folder

from a3c.host import describe_host
from a3c.metrics import EvalRecord
from a3c.plot import read_csv

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Task:
    solved: float  # the score that counts as solved
    minutes: float  # wall time per run and side
    final_episodes: int  # episodes of the final evaluation


TASKS = {
    "CartPole-v1": Task(475.0, 2.0, 10),
    "Acrobot-v1": Task(-100.0, 5.0, 10),
    "LunarLander-v3": Task(200.0, 10.0, 10),
    "Taxi-v4": Task(7.0, 5.0, 10),
    "FrozenLake-v1": Task(0.7, 5.0, 100),
    "MountainCar-v0": Task(-110.0, 10.0, 10),
    # Continuous actions (MuJoCo ids need the mujoco extra).
    "Pendulum-v1": Task(-200.0, 10.0, 10),
    "InvertedPendulum-v5": Task(1000.0, 10.0, 10),
    "MountainCarContinuous-v0": Task(90.0, 10.0, 10),
    "HalfCheetah-v5": Task(float("inf"), 30.0, 10),  # no solved score: compared by the final
}
# What a suite runs unless --envs says otherwise: the discrete environments.
DEFAULT_ENVS = ["CartPole-v1", "LunarLander-v3", "Taxi-v4", "FrozenLake-v1", "MountainCar-v0"]
EVAL_EVERY = 10_000  # agent steps between two evaluations while training, both sides
EVAL_EPISODES = 10
# The final evaluation's episode i starts from reset(seed=S + FINAL_SEEDS + i) on every side
# but sb3-a2c, so the sides' finals play the same starts (on Acrobot, the starts alone move
# a 10-episode mean by about 3 points: docs/peers.md).
FINAL_SEEDS = 2_000_000
SB3_ENVS = 8
SIDES = ["a3c", "ppo-zoo", "a2c-zoo", "a3c-no-preset", "sb3-a2c"]


@dataclass
class Result:
    env: str
    side: str
    seed: int
    seconds: float  # wall time the side trained for
    steps: int  # agent steps it made
    solved_seconds: float | None  # first evaluation mean >= the task's score
    solved_steps: int | None
    final_mean: float
    flags: list[str]
    preset: bool = False  # a3c ran with the env's shipped preset, not --no-preset
    final_episodes: int | None = None  # episodes of the final evaluation (older files: None)


def first_solved(curve: list[EvalRecord], score: float) -> tuple[float | None, int | None]:
    """Seconds and agent steps of the first evaluation whose mean reached `score`."""
    solved = next((r for r in curve if r.mean >= score), None)
    return (None, None) if solved is None else (round(solved.seconds, 1), solved.step)


def read_eval_row(row: dict[str, str]) -> EvalRecord:
    """One row of an eval.csv as a3c's evaluator wrote it."""
    return EvalRecord(
        step=int(row["step"]),
        seconds=float(row["seconds"]),
        mean=float(row["mean"]),
        std=float(row["std"]),
        min=float(row["min"]),
        max=float(row["max"]),
        mean_length=float(row["mean_length"]),
        episodes=int(row["episodes"]),
    )


# ------------------------------------------------------------------------------- a3c


def curve_folder(curves: Path | None, env: str, side: str, seed: int) -> Path | None:
    return None if curves is None else curves / env / f"{side}-seed{seed}"


def train_for(command: list[str], runs: Path, seconds: float) -> Path:
    """Run an a3c-train `command` whose --run-dir is the empty folder `runs`, stop it with
    SIGTERM once `seconds` have passed since its run folder appeared (after its imports, so
    both sides' clocks start the same way), and return that folder."""
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    started = None
    while process.poll() is None:
        if started is None and any(runs.iterdir()):
            started = time.monotonic()
        if started is not None and time.monotonic() - started >= seconds:
            process.send_signal(signal.SIGTERM)
            break
        time.sleep(0.2)
    _, stderr = process.communicate(timeout=300)
    if process.returncode not in (0, 143):
        raise RuntimeError(f"a3c-train exited {process.returncode}: {stderr.strip()[-2000:]}")
    (run,) = list(runs.iterdir())
    return run


def run_a3c(
    env: str,
    seed: int,
    seconds: float,
    flags: list[str],
    task: Task,
    preset: bool,
    curves: Path | None = None,
    side: str = "a3c",
) -> Result:
    """The real a3c-train, stopped with SIGTERM once `seconds` have passed since its trainer
    started (its run folder appears then, after the imports)."""
    with tempfile.TemporaryDirectory(prefix="a3c-suite-") as folder:
        runs = Path(folder)
        command = [str(BIN / "a3c-train"), "--env", env, "--seed", str(seed)]
        if not preset:
            command.append("--no-preset")
        command += ["--run-dir", str(runs), "--quiet", *flags]
        run = train_for(command, runs, seconds)
        keep = curve_folder(curves, env, side, seed)
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(run, keep, ignore=shutil.ignore_patterns("checkpoints", "events.*"))
        curve = [read_eval_row(row) for row in read_csv(run / "eval.csv")]
        solved_seconds, solved_steps = first_solved(curve, task.solved)
        played = subprocess.run(
            [
                str(BIN / "a3c-eval"),
                str(run / "checkpoints" / "latest.pt"),
                "--json",
                *("--episodes", str(task.final_episodes)),
                *("--seed", str(seed + FINAL_SEEDS)),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        report = json.loads(played.stdout)
        return Result(
            env=env,
            side=side,
            seed=seed,
            seconds=round(curve[-1].seconds, 1) if curve else 0.0,
            steps=int(report["step"]),
            solved_seconds=solved_seconds,
            solved_steps=solved_steps,
            final_mean=float(report["mean"]),
            flags=flags,
            preset=preset,
            final_episodes=task.final_episodes,
        )


# ------------------------------------------------------------------------- SB3's A2C


def run_sb3(
    side: str, env: str, seed: int, seconds: float, task: Task, curves: Path | None = None
) -> Result:
    """An SB3 side in a child process, so its imports and threads stay out of this one."""
    keep = curve_folder(curves, env, side, seed)
    payload = [side, env, seed, seconds, asdict(task), None if keep is None else str(keep)]
    child = subprocess.run(
        [sys.executable, __file__, "--sb3-child", json.dumps(payload)],
        capture_output=True,
        text=True,
    )
    if child.returncode != 0:
        raise RuntimeError(f"SB3 run failed: {child.stderr.strip()[-2000:]}")
    return Result(**json.loads(child.stdout.strip().splitlines()[-1]))


def sb3_child(
    side: str, env_id: str, seed: int, seconds: float, task: Task, keep: Path | None
) -> Result:
    if side in ZOO_SIDES:
        return zoo_child(side, env_id, seed, seconds, task, keep)
    return sb3_defaults_child(env_id, seed, seconds, task, keep)


def zoo_child(
    side: str, env_id: str, seed: int, seconds: float, task: Task, keep: Path | None
) -> Result:
    """SB3 with rl-baselines3-zoo's settings for `env_id`, evaluated every EVAL_EVERY
    agent steps on its own clock."""
    curve: list[EvalRecord] = []
    with tempfile.TemporaryDirectory(prefix="a3c-zoo-") as folder:
        manager, model = zoo_experiment(ZOO_SIDES[side], env_id, seed, Path(folder))
        next_evaluation = [EVAL_EVERY]

        def due(_clock: float) -> bool:
            return model.num_timesteps >= next_evaluation[0]

        def evaluate(clock: float) -> float:
            scores, lengths = zoo_evaluate(manager, model, EVAL_EPISODES, seed + 1_000_000)
            curve.append(evaluation_record(int(model.num_timesteps), clock, scores, lengths))
            next_evaluation[0] += EVAL_EVERY
            return 0.0  # evaluations count on the side's clock, as a3c's do

        trained = zoo_learn(manager, model, seconds, due, evaluate)
        final, _ = zoo_evaluate(manager, model, task.final_episodes, seed + FINAL_SEEDS)
    if keep is not None:
        write_eval_csv(keep / "eval.csv", curve)
    solved_seconds, solved_steps = first_solved(curve, task.solved)
    return Result(
        env=env_id,
        side=side,
        seed=seed,
        seconds=round(trained, 1),
        steps=int(model.num_timesteps),
        solved_seconds=solved_seconds,
        solved_steps=solved_steps,
        final_mean=statistics.fmean(final),
        flags=[],
        final_episodes=task.final_episodes,
    )


def sb3_defaults_child(
    env_id: str, seed: int, seconds: float, task: Task, keep: Path | None
) -> Result:
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    start = time.monotonic()
    model = A2C("MlpPolicy", make_vec_env(env_id, n_envs=SB3_ENVS, seed=seed), seed=seed)
    evaluation_env = make_vec_env(env_id, n_envs=1, seed=seed + 1_000_000)
    curve: list[EvalRecord] = []
    while time.monotonic() - start < seconds:
        model.learn(EVAL_EVERY, reset_num_timesteps=False)
        scores, lengths = evaluate_policy(
            model,
            evaluation_env,
            n_eval_episodes=EVAL_EPISODES,
            deterministic=True,
            return_episode_rewards=True,
        )
        record = evaluation_record(
            int(model.num_timesteps), time.monotonic() - start, scores, lengths
        )
        curve.append(record)
    trained = time.monotonic() - start
    if keep is not None:
        write_eval_csv(keep / "eval.csv", curve)
    final, _ = evaluate_policy(
        model, evaluation_env, n_eval_episodes=task.final_episodes, deterministic=True
    )
    solved_seconds, solved_steps = first_solved(curve, task.solved)
    return Result(
        env=env_id,
        side="sb3-a2c",
        seed=seed,
        seconds=round(trained, 1),
        steps=int(model.num_timesteps),
        solved_seconds=solved_seconds,
        solved_steps=solved_steps,
        final_mean=float(final),
        flags=[],
        final_episodes=task.final_episodes,
    )


def evaluation_record(
    step: int, seconds: float, scores: list[float], lengths: list[int]
) -> EvalRecord:
    """One evaluation of SB3's, as a row of a3c's eval.csv."""
    return EvalRecord(
        step=step,
        seconds=round(seconds, 3),
        mean=statistics.fmean(scores),
        std=statistics.pstdev(scores),
        min=min(scores),
        max=max(scores),
        mean_length=statistics.fmean(lengths),
        episodes=len(scores),
    )


def write_eval_csv(path: Path, records: list[EvalRecord]) -> None:
    """SB3's evaluations in the columns of a3c's eval.csv, which `a3c-plot` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=[f.name for f in fields(EvalRecord)])
        writer.writeheader()
        writer.writerows(asdict(record) for record in records)


# ---------------------------------------------------------------------------- report


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(results: list[Result]) -> str:
    """One row per environment and side: solved runs, median time and steps to the solved
    score (over the runs that got there), the final evaluations, steps made."""
    rows = [
        "| environment | seeds | side | solved | median s to solve | median steps to solve "
        "| median final evaluation | final evaluation by seed | median steps made |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for env in dict.fromkeys(r.env for r in results):
        for side in dict.fromkeys(label(r) for r in results):
            runs = [r for r in results if r.env == env and label(r) == side]
            if not runs:
                continue
            done = [r for r in runs if r.solved_seconds is not None]
            seconds = median([r.solved_seconds for r in done if r.solved_seconds is not None])
            steps = median([float(r.solved_steps) for r in done if r.solved_steps is not None])
            rows.append(
                f"| {env} | {' '.join(str(r.seed) for r in runs)} | {side} "
                f"| {len(done)} of {len(runs)} | {_cell(seconds, '.1f')} | {_cell(steps, ',.0f')} "
                f"| {_cell(median([r.final_mean for r in runs]), '.2f')} "
                f"| {', '.join(format(r.final_mean, '.2f') for r in runs)} "
                f"| {_cell(median([float(r.steps) for r in runs]), ',.0f')} |"
            )
    return "\n".join(rows)


def label(result: Result) -> str:
    """The side as the table names it: an a3c run says whether it took the preset."""
    if result.side == "a3c":
        return "a3c (preset)" if result.preset else "a3c --no-preset"
    return "a3c --no-preset" if result.side == "a3c-no-preset" else result.side


def _cell(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=DEFAULT_ENVS, choices=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--minutes", type=float, default=None, help="wall time per run (default: per env)"
    )
    parser.add_argument("--sides", nargs="+", default=SIDES[:3], choices=SIDES)
    parser.add_argument(
        "--preset", action="store_true", help="a3c uses the env's shipped preset, if any"
    )
    parser.add_argument(
        "--final-episodes",
        type=int,
        help="episodes of the final evaluation (default: per env); 100 tells policies a few "
        "points apart from the starts' luck",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/suite/results.jsonl"))
    parser.add_argument("--report", type=Path, nargs="+", help="only summarise these files")
    parser.add_argument("--curves", type=Path, help="keep every run's eval.csv here, for a3c-plot")
    parser.add_argument("--sb3-child", help=argparse.SUPPRESS)
    parser.add_argument("flags", nargs="*", help="a3c-train flags, after --")
    args = parser.parse_args()
    print(describe_host(), flush=True)

    if args.sb3_child:
        side, env, seed, seconds, task, keep = json.loads(args.sb3_child)
        result = sb3_child(
            side, env, seed, seconds, Task(**task), None if keep is None else Path(keep)
        )
        print(json.dumps(asdict(result)))
        return 0
    if args.report:
        results = [Result(**json.loads(line)) for f in args.report for line in f.open()]
        print(summary(results))
        return 0

    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    for env in args.envs:
        task = TASKS[env]
        if args.final_episodes is not None:
            task = replace(task, final_episodes=args.final_episodes)
        seconds = 60 * (args.minutes if args.minutes is not None else task.minutes)
        for number, seed in enumerate(args.seeds):
            shift = number % len(args.sides)
            for side in args.sides[shift:] + args.sides[:shift]:
                if side.startswith("a3c"):
                    preset = args.preset and side == "a3c"
                    result = run_a3c(
                        env, seed, seconds, args.flags, task, preset, args.curves, side
                    )
                else:
                    result = run_sb3(side, env, seed, seconds, task, args.curves)
                results.append(result)
                with args.out.open("a") as file:
                    file.write(json.dumps(asdict(result)) + "\n")
                print(
                    f"{env} seed {seed} {side}: final {result.final_mean:.2f}, solved at "
                    f"{result.solved_seconds} s / {result.solved_steps} steps, "
                    f"{result.steps:,} steps in {result.seconds} s",
                    flush=True,
                )
    print(summary(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
