"""The A3C loss of a rollout, and the hand-off of its gradient to the shared optimiser.

A `Rollout` holds what a worker played; `a3c_loss` turns it into the policy-gradient,
value and entropy terms; `apply_gradients` backpropagates locally and steps the shared
optimiser with exactly that update's gradient.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from a3c.config import TrainConfig
from a3c.metrics import EpisodeRecord, LossStats
from a3c.model import Scores, State
from a3c.returns import gae, n_step_returns
from a3c.sharing import NO_LOCK


@dataclass
class Rollout:
    """t_max steps of a worker's K environments, indexed [T, K], as the loss needs them.

    A rollout runs on across episode ends: an environment that finishes is reset at once,
    and its row of the recurrent state restarts from zero.
    """

    features: torch.Tensor  # [T, K, F] the encoder's outputs, with the rollout's autograd graph
    states: State  # [T, K, H] the core state fed to each step (None without an LSTM)
    carried: torch.Tensor  # [T, K] a step's state was the step before's (no new game began)
    actions: np.ndarray  # [T, K, *action_shape] as sampled: unclipped for continuous actions
    rewards: np.ndarray  # [T, K] the rewards learned from: clipped when the config says so
    terminal: np.ndarray  # [T, K] nothing to bootstrap after this step (or a life was lost)
    episode_end: np.ndarray  # [T, K] no return flows back across this step
    final_values: np.ndarray  # [T, K] V(final observation) at a truncation, else 0
    bootstrap_values: np.ndarray  # [K] V(observation after the last step)
    episodes: list[EpisodeRecord]  # episodes that ended, with their real scores
    observations: np.ndarray | None  # [T, K, ...] as the envs gave them, for obs_norm
    discounted_returns: np.ndarray | None  # [T, K] for return_norm

    def __len__(self) -> int:
        """Agent steps: T x K, whatever the shape of one action."""
        return int(self.rewards.size)


def a3c_loss(scores: Scores, rollout: Rollout, config: TrainConfig) -> LossTerms:
    """Policy gradient, value regression and entropy bonus of a rollout's scored steps."""
    values = scores.value
    rewards = torch.from_numpy(rollout.rewards)
    terminal = torch.from_numpy(rollout.terminal)
    episode_end = torch.from_numpy(rollout.episode_end)
    following = torch.cat(
        [values[1:].detach(), torch.from_numpy(rollout.bootstrap_values).unsqueeze(0)]
    )
    truncated = episode_end & ~terminal
    next_values = torch.where(truncated, torch.from_numpy(rollout.final_values), following)
    if config.advantage == "gae":
        advantages = gae(
            rewards,
            values.detach(),
            next_values,
            terminal,
            episode_end,
            config.gamma,
            config.gae_lambda,
        )
        returns = advantages + values.detach()
    else:
        returns = n_step_returns(rewards, next_values, terminal, episode_end, config.gamma)
        advantages = returns - values.detach()
    policy_loss = -(advantages * scores.log_prob).mean()
    value_loss = F.mse_loss(values, returns)
    entropy = scores.entropy.mean()
    total = (
        policy_loss
        + config.vf_coef * value_loss
        - config.entropy_bonus * entropy
        + BOUND_COEF * scores.beyond_bounds.mean()
    )
    return LossTerms(total, policy_loss.detach(), value_loss.detach(), entropy.detach())


# Weight of the penalty on a Gaussian mean past the action bounds (`policy.beyond_bounds`).
BOUND_COEF = 1.0


class LossTerms(NamedTuple):
    total: torch.Tensor  # what is backpropagated
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor


class LossAverages:
    """Running sums of one worker's loss terms between two reports."""

    def __init__(self) -> None:
        self.updates = 0
        self.sums = dict.fromkeys(("policy", "value", "entropy", "grad_norm"), 0.0)
        self.learning_rate = 0.0

    def add(self, terms: LossTerms, grad_norm: float, learning_rate: float) -> None:
        self.updates += 1
        self.sums["policy"] += float(terms.policy)
        self.sums["value"] += float(terms.value)
        self.sums["entropy"] += float(terms.entropy)
        self.sums["grad_norm"] += grad_norm
        self.learning_rate = learning_rate

    def report(self, rank: int, step: int, sigmas: dict[str, float]) -> LossStats:
        n = self.updates
        return LossStats(
            worker=rank,
            step=step,
            updates=n,
            policy_loss=self.sums["policy"] / n,
            value_loss=self.sums["value"] / n,
            entropy=self.sums["entropy"] / n,
            grad_norm=self.sums["grad_norm"] / n,
            learning_rate=self.learning_rate,
            sigma_encoder=sigmas.get("encoder"),
            sigma_core=sigmas.get("core"),
            sigma_policy=sigmas.get("policy"),
            sigma_value=sigmas.get("value"),
        )


def apply_gradients(
    local_model: torch.nn.Module,
    shared_model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    max_grad_norm: float,
    lock: contextlib.AbstractContextManager[Any] = NO_LOCK,
) -> float:
    """Backpropagate `loss` locally and step the shared optimiser with exactly its gradient.

    The shared parameters' ``.grad`` is pointed at this update's local gradients every time.
    Local gradients are cleared (set to None) before each backward, so nothing accumulates
    across updates. The classic ``ensure_shared_grads`` skipped the hand-over once a shared
    grad existed, which on torch >= 2.0 fed the optimiser running sums of gradients.

    A non-finite loss or gradient is never handed over: the shared weights and optimiser
    state stay untouched. Returns the gradient norm before clipping (NaN or inf when the
    update was skipped). `lock` is held around the hand-over and step only.
    """
    local_model.zero_grad(set_to_none=True)
    if not torch.isfinite(loss):
        return float("nan")
    loss.backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(local_model.parameters(), max_grad_norm))
    if not math.isfinite(grad_norm):
        return grad_norm
    with lock:
        for shared, local in zip(shared_model.parameters(), local_model.parameters(), strict=True):
            shared.grad = local.grad
        optimizer.step()
    return grad_norm
