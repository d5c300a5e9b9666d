"""Running statistics for observation normalisation and reward scaling.

They live as buffers of the shared model, so every worker reads the same statistics, the
evaluator copies them with the weights, and checkpoints carry them: `a3c-eval` and
`--resume` see exactly what training saw. Workers merge their rollouts into them without
a lock, as they step the weights: a worker killed while holding one would stall every
other worker for good (a3c/sharing.py). Two merges at once can lose one's count or mix
their means and variances; both are near the data's either way, and the statistics stay
right (tests/test_normalize.py: two processes merging without pause).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

# Normalised observations are clipped to this many standard deviations, as gymnasium's
# NormalizeObservation users and SB3's VecNormalize do: one freak observation early in
# training cannot feed the network a value of thousands.
OBSERVATION_CLIP = 10.0
EPSILON = 1e-8
# Scaled rewards are clipped too, as SB3's VecNormalize does. Until an environment pays its
# first reward every return is 0, so the spread is sqrt(EPSILON) and that first reward
# would arrive 10,000 times its size: on FrozenLake the critic's loss jumped to 125,000
# and some runs needed twice the steps to learn (docs/defaults.md).
REWARD_CLIP = 10.0


class RunningMeanStd(nn.Module):
    """Mean and variance of everything merged so far (Chan et al.'s parallel update).

    Until the first merge the mean is 0 and the variance 1, so `normalize` is the identity.
    Float64: millions of merged samples would lose precision in float32.
    """

    count: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))

    @torch.no_grad()
    def update(self, batch: np.ndarray | torch.Tensor) -> None:
        """Merge a batch [N, *shape] into the statistics, in place."""
        values = torch.as_tensor(np.asarray(batch), dtype=torch.float64)
        values = values.reshape(-1, *self.mean.shape)
        # A non-finite sample (a faulty environment's NaN reward) would poison the shared
        # statistics, and with them every worker's inputs or rewards, for good.
        values = values[torch.isfinite(values.reshape(values.shape[0], -1)).all(1)]
        n = values.shape[0]
        if n == 0:
            return
        batch_mean = values.mean(0)
        batch_var = values.var(0, unbiased=False)
        count = float(self.count)
        total = count + n
        delta = batch_mean - self.mean
        squares = self.var * count + batch_var * n + delta.square() * (count * n / total)
        self.mean.add_(delta * (n / total))
        self.var.copy_(squares / total)
        self.count.fill_(total)

    @property
    def std(self) -> torch.Tensor:
        return (self.var + EPSILON).sqrt()

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        """Standardised and clipped to ±OBSERVATION_CLIP, in float32."""
        scaled = (values.double() - self.mean) / self.std
        return scaled.clamp(-OBSERVATION_CLIP, OBSERVATION_CLIP).float()


class DiscountedReturns:
    """Each environment's running discounted return, whose spread scales the rewards.

    gymnasium's NormalizeReward divides rewards by the standard deviation of this
    return, not of the rewards themselves: what the critic regresses on is returns, and
    dividing by their spread keeps its targets near unit scale whatever the
    environment's reward size, so a large value loss cannot drown the policy gradient.
    """

    def __init__(self, count: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns = np.zeros(count, dtype=np.float64)

    def step(self, rewards: np.ndarray, episode_end: np.ndarray) -> np.ndarray:
        """Add one step's rewards [K]; returns the returns [K], then restarts ended ones."""
        self.returns = self.returns * self.gamma + rewards
        seen = self.returns.copy()
        self.returns[~np.isfinite(self.returns)] = 0.0  # a NaN reward ends no episode
        self.returns[episode_end] = 0.0
        return seen
