"""Evaluation episodes played side by side: the same games as one at a time, cheaper."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch

from a3c.config import TrainConfig
from a3c.envs import describe_env, make_env
from a3c.evaluator import MAX_PARALLEL_EPISODES, evaluation_envs, play_episodes
from a3c.model import build_model


class StepCounter(gym.Wrapper):
    """Counts the steps an env is given, over all its episodes."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        return self.env.step(action)


@pytest.mark.parametrize("greedy", [True, False])
def test_episodes_side_by_side_are_the_games_played_one_at_a_time(greedy: bool) -> None:
    config = TrainConfig(env="CartPole-v1", hidden_size=32)
    envs = [StepCounter(make_env(config.env)) for _ in range(6)]
    torch.manual_seed(3)
    profile = describe_env(config.env)
    model = build_model(config, profile)
    side_by_side = play_episodes(model, envs, profile, 6, seed=40, greedy=greedy, max_steps=500)
    one_at_a_time = play_episodes(
        model, envs[:1], profile, 6, seed=40, greedy=greedy, max_steps=500
    )
    assert side_by_side == one_at_a_time
    assert side_by_side.lengths == [len(actions) for actions in side_by_side.actions]
    # The episodes end at different steps, and an ended one is not stepped again.
    assert len(set(side_by_side.lengths)) > 1
    assert [env.steps for env in envs[1:]] == side_by_side.lengths[1:]
    assert envs[0].steps == side_by_side.lengths[0] + sum(one_at_a_time.lengths)
    for env in envs:
        env.close()


def test_pong_frames_play_side_by_side_as_one_at_a_time() -> None:
    config = TrainConfig(env="PongNoFrameskip-v4", hidden_size=64)
    envs = evaluation_envs(config.env, 3, "test")
    torch.manual_seed(0)
    profile = describe_env(config.env)
    model = build_model(config, profile)
    side_by_side = play_episodes(model, envs, profile, 3, seed=7, greedy=False, max_steps=150)
    one_at_a_time = play_episodes(model, envs[:1], profile, 3, seed=7, greedy=False, max_steps=150)
    assert side_by_side == one_at_a_time
    assert side_by_side.lengths == [150, 150, 150]
    assert len({tuple(actions) for actions in side_by_side.actions}) == 3
    for env in envs:
        env.close()


def test_an_evaluation_plays_at_most_a_capped_number_of_episodes_at_once() -> None:
    many = evaluation_envs("CartPole-v1", MAX_PARALLEL_EPISODES + 4, "test")
    few = evaluation_envs("CartPole-v1", 3, "test")
    assert (len(many), len(few)) == (MAX_PARALLEL_EPISODES, 3)
    for env in many + few:
        env.close()
