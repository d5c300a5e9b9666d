"""What the learner sees of an env batch's steps: the stage between the envs and the rollout.

The envs report the games' real rewards and episode ends; logged scores stay those. What
the loss learns from may differ, as the config says: rewards clipped to [-1, 1], a lost
life counted as a terminal while the game goes on, and rewards divided by the running
standard deviation of the discounted return. `collect_rollout` asks this stage and never
which of these apply.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from a3c.batches import BatchStep
from a3c.config import TrainConfig
from a3c.normalize import REWARD_CLIP, DiscountedReturns, RunningMeanStd


class LearningStep(NamedTuple):
    """One batch step as the loss sees it, each [K]."""

    rewards: np.ndarray  # clipped where the config says so; scaled later, per rollout
    terminal: np.ndarray  # nothing to bootstrap after this step (or a life was lost)
    episode_end: np.ndarray  # no return flows back across this step


class RewardStage:
    """One worker's view of its K environments' rewards and episode ends."""

    def __init__(self, config: TrainConfig, lives: np.ndarray, scaled: bool) -> None:
        """`lives` as the envs' reset gave them; `scaled`: the model keeps the running
        statistics of the discounted return that rewards are divided by."""
        self.clip = config.clip_rewards
        self.life_loss_terminal = config.life_loss_terminal
        self.lives = lives
        self.returns = DiscountedReturns(len(lives), config.gamma) if scaled else None

    def step(self, result: BatchStep) -> tuple[LearningStep, np.ndarray | None]:
        """The learner's view of `result`, and the discounted returns that step reached
        (for the running statistics; None without reward scaling)."""
        rewards = np.clip(result.rewards, -1.0, 1.0) if self.clip else result.rewards
        rewards = rewards.astype(np.float32)  # as the rollout stores them
        ended = result.terminated | result.truncated
        # A lost life counts only while the game goes on: where an episode ended, the
        # lives are the next game's.
        life_lost = self.life_loss_terminal & ~ended & (result.lives < self.lives)
        self.lives = result.lives
        # A truncation is not a terminal: the final observation still has a value.
        learned = LearningStep(rewards, result.terminated | life_lost, ended | life_lost)
        returns = None if self.returns is None else self.returns.step(rewards, learned.episode_end)
        return learned, returns

    @staticmethod
    def scale(rewards: np.ndarray, return_norm: RunningMeanStd | None) -> None:
        """Divide a rollout's rewards [T, K] in place by the return's standard deviation at
        the rollout's start, and clip them (nothing without reward scaling).

        One scale for every step of a rollout: the local statistics change only when the
        next rollout loads the shared ones.
        """
        if return_norm is None:
            return
        rewards /= float(return_norm.std)
        np.clip(rewards, -REWARD_CLIP, REWARD_CLIP, out=rewards)
