"""Return and advantage estimation as pure functions of tensors.

All inputs are indexed by time along dimension 0 (any trailing batch dimensions are
allowed). For step ``t``:

- ``rewards[t]``: the reward received after the action at ``t``;
- ``values[t]``: V(s_t);
- ``next_values[t]``: V(s_{t+1}), where s_{t+1} is the observation the step returned: at a
  time-limit truncation that is the episode's final observation, not the next reset;
- ``terminated[t]``: s_{t+1} is terminal, so nothing is bootstrapped from it;
- ``episode_end[t]``: the episode ended at ``t`` (terminated or truncated), so no return
  or advantage flows back from ``t + 1`` into ``t``.

The last step's ``next_values`` is the bootstrap value of the rollout.
"""

from __future__ import annotations

import torch


def n_step_returns(
    rewards: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    episode_end: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Discounted n-step returns ``R_t = r_t + gamma * R_{t+1}``, bootstrapped from V."""
    returns = torch.empty_like(rewards)
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    running = next_values[-1] * not_terminated[-1]
    for t in reversed(range(rewards.shape[0])):
        if t < rewards.shape[0] - 1:
            cut = episode_end[t].to(rewards.dtype)
            running = cut * next_values[t] * not_terminated[t] + (1.0 - cut) * running
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    episode_end: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """Generalised advantage estimates (Schulman et al. 2016).

    ``delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t)`` and
    ``A_t = delta_t + gamma * lambda * (1 - episode_end_t) * A_{t+1}``.
    """
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    continues = 1.0 - episode_end.to(rewards.dtype)
    deltas = rewards + gamma * next_values * not_terminated - values
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * gae_lambda * continues[t] * running
        advantages[t] = running
    return advantages
