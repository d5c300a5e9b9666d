"""What an evaluation costs: its episodes played one at a time against side by side.

    python scripts/bench_evaluation.py --env PongNoFrameskip-v4 --episodes 10
    python scripts/bench_evaluation.py --checkpoint RUN/checkpoints/best.pt

Plays the same evaluation (the preset's model, or a checkpoint's weights; greedy; the
evaluator's seeds) with one env, one frame per forward pass, as the evaluator did before
it batched, and with one env per episode, all episodes' frames in one forward pass, as it
does now. The two are timed alternately (one, side, one, side, ...) in one process with
one thread, as the evaluator runs, and their agent steps per second of the evaluation
printed side by side. An untrained Pong agent loses its games in about 760 steps; a
trained one plays about 2,150, so a checkpoint gives the cost of a late evaluation.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from a3c.checkpoint import load_checkpoint
from a3c.config import TrainConfig
from a3c.envs import EnvRecipe, describe_env
from a3c.evaluator import EVAL_SEED_OFFSET, evaluation_envs, play_episodes
from a3c.host import describe_host
from a3c.model import build_model
from a3c.presets import find_preset, load_toml


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="PongNoFrameskip-v4")
    parser.add_argument("--checkpoint", help="play these weights (and their config)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="timings of each way")
    args = parser.parse_args()
    print(describe_host(), flush=True)
    torch.set_num_threads(1)
    if args.checkpoint:
        checkpoint = load_checkpoint(args.checkpoint)
        config = TrainConfig.from_dict(checkpoint["config"])
    else:
        preset = find_preset(args.env)
        config = TrainConfig(env=args.env)
        if preset is not None:
            config = config.replace(load_toml(preset))
    recipe = EnvRecipe.of(config)
    envs = evaluation_envs(recipe, args.episodes, "bench")
    profile = describe_env(recipe)
    model = build_model(config, profile)
    if args.checkpoint:
        model.load_state_dict(checkpoint["model"])
    model.eval()
    ways = {"one at a time": envs[:1], "side by side": envs}
    rates: dict[str, list[float]] = {way: [] for way in ways}
    scores = {}
    for _ in range(args.rounds):
        for way, way_envs in ways.items():
            started = time.perf_counter()
            played = play_episodes(
                model,
                way_envs,
                profile,
                args.episodes,
                seed=config.seed + EVAL_SEED_OFFSET,
                greedy=True,
                max_steps=config.eval_max_steps,
            )
            rates[way].append(sum(played.lengths) / (time.perf_counter() - started))
            scores[way] = played.mean
    print(f"{config.env}, {args.episodes} episodes, greedy, 1 thread")
    print("| episodes played | agent steps/s of evaluation | mean score |")
    print("|---|---:|---:|")
    for way, way_rates in rates.items():
        rounds = ", ".join(f"{rate:,.0f}" for rate in way_rates)
        print(f"| {way} | {statistics.median(way_rates):,.0f} ({rounds}) | {scores[way]:.2f} |")
    ratio = statistics.median(rates["side by side"]) / statistics.median(rates["one at a time"])
    print(f"side by side / one at a time: {ratio:.2f}x")
    for env in envs:
        env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
