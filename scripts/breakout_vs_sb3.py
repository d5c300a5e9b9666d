"""Breakout for the same wall time: a3c's shipped preset against SB3's A2C with the Atari
settings of rl-baselines3-zoo.

    pip install -e ".[bench,plot]"
    python scripts/breakout_vs_sb3.py --minutes 60 --out runs/breakout --plot docs/breakout.png
    python scripts/breakout_vs_sb3.py --out runs/breakout --sides sb3-a2c   # one side again
    python scripts/breakout_vs_sb3.py --out runs/breakout --report          # table, plot only

a3c: the real `a3c-train --env BreakoutNoFrameskip-v4 --workers 2` (configs/breakout.toml,
more flags after --), stopped with SIGTERM when the time is up. Its curve is its own
evaluator's eval.csv: whole games on the same 2 cores as its training, actions sampled
(the preset's eval_policy; docs/atari.md).

SB3: A2C("CnnPolicy") on `make_atari_env` (16 envs, `AtariWrapper`) with 4 stacked frames,
ent_coef 0.01, vf_coef 0.25 and RMSpropTFLike(eps=1e-5): the zoo's `atari` entry, every
other setting SB3's default. Its clock counts training only: its weights are saved every
--snapshot-minutes and evaluated once the time is up, so evaluating costs it nothing while
a3c's evaluator shares the cores with a3c's training. That favours SB3. An SB3 evaluation
is 10 whole games (a lost life ends no game), actions sampled as a3c's preset samples them
and as the zoo's own `enjoy.py` plays Atari agents (stochastic unless --deterministic),
game i from seed + i, each cut at 10,000 agent steps as a3c's are, unclipped.
`--reevaluate` plays the saved snapshots again and rewrites SB3's eval.csv.

The sides run one after the other, a3c first, on a machine doing nothing else. Prints each
side's last evaluation at every 10-minute mark (up to 30 s after it) and draws both curves
in one figure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_suite import evaluation_record, train_for, write_eval_csv  # same folder

from a3c.host import describe_host
from a3c.plot import plot_runs, read_csv

ENV = "BreakoutNoFrameskip-v4"
BIN = Path(sys.executable).parent
SIDES = ("a3c", "sb3-a2c")
EVAL_EPISODES = 10
EVAL_MAX_STEPS = 10_000  # agent steps per game, a3c's --eval-max-steps in the preset
MARK_MINUTES = 10
# SB3's snapshots are taken a few seconds after each 5 training minutes (603 s for the
# 10-minute one): without this slack a mark would show the snapshot 5 minutes older.
MARK_SLACK_SECONDS = 30


def run_a3c(out: Path, seconds: float, flags: list[str]) -> None:
    """The real a3c-train for `seconds` from when its run folder appears (after imports)."""
    with tempfile.TemporaryDirectory(prefix="a3c-breakout-") as folder:
        runs = Path(folder)
        command = [str(BIN / "a3c-train"), "--env", ENV, "--workers", "2",
                   "--run-dir", str(runs), *flags]  # fmt: skip
        run = train_for(command, runs, seconds)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(run, out, ignore=shutil.ignore_patterns("checkpoints", "events.*"))


def run_sb3(out: Path, seconds: float, snapshot_seconds: float, seed: int) -> None:
    """SB3's A2C in a child process, so its imports and threads stay out of this one."""
    payload = json.dumps([str(out), seconds, snapshot_seconds, seed])
    subprocess.run([sys.executable, __file__, "--sb3-child", payload], check=True)


def sb3_atari_env(n_envs: int, seed: int, **wrapper_kwargs: object) -> Any:
    """SB3's Breakout: `AtariWrapper` games with 4 stacked frames, the zoo's settings."""
    import ale_py
    import gymnasium
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gymnasium.register_envs(ale_py)  # the Atari ids, for make_atari_env
    return VecFrameStack(
        make_atari_env(ENV, n_envs=n_envs, seed=seed, wrapper_kwargs=wrapper_kwargs), n_stack=4
    )


def sb3_child(out: Path, seconds: float, snapshot_seconds: float, seed: int) -> None:
    from stable_baselines3 import A2C
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

    shutil.rmtree(out, ignore_errors=True)
    snapshots = out / "snapshots"
    snapshots.mkdir(parents=True)
    env = sb3_atari_env(16, seed)
    model = A2C(
        "CnnPolicy",
        env,
        ent_coef=0.01,
        vf_coef=0.25,
        policy_kwargs={"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}},
        seed=seed,
    )
    trained, saved = 0.0, []
    while trained < seconds:
        started = time.monotonic()
        model.learn(16 * 5 * 25, reset_num_timesteps=False)  # 25 updates
        trained += time.monotonic() - started
        if trained >= (len(saved) + 1) * snapshot_seconds or trained >= seconds:
            path = snapshots / f"{len(saved):03d}.zip"
            model.save(path)
            saved.append((path, int(model.num_timesteps), trained))
            print(f"sb3-a2c: {trained / 60:.1f} min, {model.num_timesteps:,} agent steps")
    evaluate_sb3(out, [(step, at) for _, step, at in saved], seed)


def evaluate_sb3(out: Path, snapshots: list[tuple[int, float]], seed: int) -> None:
    """Play snapshot i of `out`/snapshots (taken at (step, seconds) `snapshots[i]`)."""
    import torch
    from stable_baselines3 import A2C

    records = []
    for index, (step, at) in enumerate(snapshots):
        model = A2C.load(out / "snapshots" / f"{index:03d}.zip", device="cpu")
        torch.manual_seed(seed)  # SB3 samples its actions from torch's global generator
        scores, lengths = play_sb3(model, seed + 1_000_000)
        records.append(evaluation_record(step, at, scores, lengths))
        print(f"sb3-a2c: evaluation at {at / 60:.1f} min: {records[-1].mean:.1f}")
    write_eval_csv(out / "eval.csv", records)


def reevaluate_sb3(out: Path, seed: int) -> None:
    """Play the saved snapshots again; eval.csv's rows keep their step and time."""
    snapshots = [(int(row["step"]), float(row["seconds"])) for row in read_csv(out / "eval.csv")]
    payload = json.dumps([str(out), snapshots, seed])
    subprocess.run([sys.executable, __file__, "--sb3-reevaluate", payload], check=True)


def play_sb3(model: object, seed: int) -> tuple[list[float], list[int]]:
    """EVAL_EPISODES whole games side by side, actions sampled; game i starts from seed + i."""
    import numpy as np

    # Rewards unclipped for the score; a lost life still ends the wrapper's episode, as in
    # training (with a reset that presses FIRE), but not the game, which Monitor reports.
    env = sb3_atari_env(EVAL_EPISODES, seed, clip_reward=False)
    observations = env.reset()
    scores = np.zeros(EVAL_EPISODES)
    lengths = np.zeros(EVAL_EPISODES, dtype=int)
    playing = np.ones(EVAL_EPISODES, dtype=bool)
    while playing.any():
        actions, _ = model.predict(observations, deterministic=False)  # type: ignore[attr-defined]
        observations, rewards, _, infos = env.step(actions)
        scores += np.where(playing, rewards, 0.0)
        lengths += playing
        for i, info in enumerate(infos):
            if "episode" in info or lengths[i] >= EVAL_MAX_STEPS:
                playing[i] = False
    env.close()
    return scores.tolist(), lengths.tolist()


def report(out: Path, plot: Path | None) -> str:
    curves = {side: read_csv(out / side / "eval.csv") for side in SIDES}
    longest = max((float(r["seconds"]) for rows in curves.values() for r in rows), default=0.0)
    lines = ["| minutes | " + " | ".join(SIDES) + " |", "|---:|" + "---:|" * len(SIDES)]
    mark = MARK_MINUTES
    while mark * 60 <= longest + 60:
        cells = []
        for side in SIDES:
            before = [
                r for r in curves[side] if float(r["seconds"]) <= mark * 60 + MARK_SLACK_SECONDS
            ]
            cells.append(
                f"{float(before[-1]['mean']):.1f} ({int(before[-1]['step']) / 1e6:.2f} M)"
                if before
                else "none"
            )
        lines.append(f"| {mark} | " + " | ".join(cells) + " |")
        mark += MARK_MINUTES
    if plot is not None:
        plot_runs([out / side for side in SIDES if curves[side]], plot)
        lines.append(f"\nwrote {plot}")
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:2] == ["--sb3-child"]:
        out, seconds, snapshot_seconds, seed = json.loads(sys.argv[2])
        sb3_child(Path(out), seconds, snapshot_seconds, seed)
        return 0
    if sys.argv[1:2] == ["--sb3-reevaluate"]:
        out, snapshots, seed = json.loads(sys.argv[2])
        evaluate_sb3(Path(out), [(int(step), float(at)) for step, at in snapshots], seed)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="wall time per side")
    parser.add_argument("--out", type=Path, default=Path("runs/breakout-vs-sb3"))
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--snapshot-minutes", type=float, default=5.0,
                        help="SB3: training minutes between evaluated snapshots")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="SB3's seed (a3c's is its preset's)")
    parser.add_argument("--plot", type=Path, help="PNG of both curves")
    parser.add_argument("--report", action="store_true", help="no training: table and plot")
    parser.add_argument("--reevaluate", action="store_true",
                        help="no training: play SB3's saved snapshots again")  # fmt: skip
    parser.add_argument("train_args", nargs="*", help="more a3c-train flags, after --")
    args = parser.parse_args()
    print(describe_host(), flush=True)
    if args.reevaluate:
        reevaluate_sb3(args.out / "sb3-a2c", args.seed)
    elif not args.report:
        seconds = args.minutes * 60
        if "a3c" in args.sides:
            run_a3c(args.out / "a3c", seconds, args.train_args)
        if "sb3-a2c" in args.sides:
            run_sb3(args.out / "sb3-a2c", seconds, args.snapshot_minutes * 60, args.seed)
    print(report(args.out, args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
