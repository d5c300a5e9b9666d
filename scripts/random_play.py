"""Scores of uniformly random actions: the floor a trained agent's evaluations are read against.

    python scripts/random_play.py SpaceInvadersNoFrameskip-v4 SeaquestNoFrameskip-v4

Each game goes through the wrappers a3c trains and evaluates with (`make_env`: for Atari, 1 to
30 no-ops and 4 frames per agent step), game i starting from reset(seed=i), and is scored as
the evaluator scores it: the environment's own, unclipped rewards of the whole game.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from a3c.envs import make_env


def random_scores(env_id: str, games: int, seed: int) -> list[float]:
    env = make_env(env_id)
    if not isinstance(env.action_space, gym.spaces.Discrete):
        env.close()
        raise ValueError(f"{env_id} has {env.action_space}; only discrete actions are played")
    rng = np.random.default_rng(seed)
    scores = []
    for game in range(games):
        env.reset(seed=game)
        score, over = 0.0, False
        while not over:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            score += float(reward)
            over = terminated or truncated
        scores.append(score)
    env.close()
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="+", help="gymnasium ids with discrete actions")
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="seed of the action generator")
    args = parser.parse_args()
    for env_id in args.envs:
        try:
            scores = random_scores(env_id, args.games, args.seed)
        except ValueError as error:
            parser.error(str(error))
        print(f"{env_id}: random play, {args.games} games: mean {np.mean(scores):.1f} "
              f"± {np.std(scores):.1f} (min {min(scores):g}, max {max(scores):g})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
