"""Action distributions: one interface for discrete (Categorical) and continuous (Gaussian).

The model's policy layer maps the core's output to a tensor of distribution parameters
(`params`): logits [..., A] for discrete actions; for continuous ones the Gaussian's mean
and standard deviation side by side [..., 2D]. An `ActionDistribution` turns `params`
into sampled or greedy actions and into the log-probabilities and entropies the loss
needs, so the worker, the batched re-scoring of a rollout and the evaluator never ask
which kind of action space they serve.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Independent, Normal

LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))

# The Gaussian's standard deviation stays between these, in the policy's [-1, 1] action
# units (docs/continuous.md). The floor: MountainCarContinuous's std shrank to 0.07 once the
# goal was found; a later update that lost the goal left too little noise to find it again,
# and the action cost drove the policy to stand still. The ceiling: the env clips actions to
# the bounds, so a wider Gaussian only clips more samples to them; with no ceiling,
# Pendulum's entropy bonus widened the std past 30 and its actions became coin flips
# between the two bounds. Greedy evaluation plays the mean, so neither limit costs it.
MIN_STD = 0.2
MAX_STD = 1.0
# An untrained policy's std: MIN_STD + (MAX_STD - MIN_STD) * sigmoid(2) = 0.90.
STD_LOGIT_INIT = 2.0


class ActionScores(NamedTuple):
    log_prob: torch.Tensor  # [...] log pi(action)
    entropy: torch.Tensor  # [...]
    # [...] how far a Gaussian's mean lies beyond the action bounds (squared); 0 otherwise
    beyond_bounds: torch.Tensor


class ActionDistribution(Protocol):
    """What the model, the worker and the evaluator need of an action distribution."""

    @property
    def action_shape(self) -> tuple[int, ...]:
        """One action's shape: () for discrete, (D,) for continuous."""
        ...

    @property
    def action_dtype(self) -> np.dtype:
        """How rollouts store actions."""
        ...

    def sample(
        self, params: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """One action per row of `params`."""
        ...

    def greedy(self, params: torch.Tensor) -> torch.Tensor:
        """The most probable action (the mean, for a Gaussian)."""
        ...

    def score(self, params: torch.Tensor, actions: torch.Tensor) -> ActionScores:
        """Log-probabilities of `actions` and the entropies, with gradients."""
        ...

    def distribution(self, params: torch.Tensor) -> Distribution:
        """The `torch.distributions` object, for tests and anyone reading the policy."""
        ...


class CategoricalActions:
    """Discrete actions: a softmax over logits."""

    action_shape: tuple[int, ...] = ()
    action_dtype = np.dtype(np.int64)

    def sample(
        self, params: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Inverts the CDF by hand instead of calling `Categorical.sample`: on a small CPU
        model that call costs more than the rest of the forward pass (130 us against 30 us
        per step)."""
        cdf = torch.softmax(params, -1).cumsum(-1)
        uniform = torch.rand((*cdf.shape[:-1], 1), generator=generator)
        return (cdf < uniform).sum(-1).clamp_max(params.shape[-1] - 1)

    def greedy(self, params: torch.Tensor) -> torch.Tensor:
        return params.argmax(-1)

    def score(self, params: torch.Tensor, actions: torch.Tensor) -> ActionScores:
        log_probs = torch.log_softmax(params, -1)
        return ActionScores(
            log_prob=log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1),
            entropy=-(log_probs.exp() * log_probs).sum(-1),
            beyond_bounds=params.new_zeros(()),
        )

    def distribution(self, params: torch.Tensor) -> Distribution:
        return Categorical(logits=params)


class GaussianActions:
    """Continuous actions: a diagonal Gaussian over D dimensions, params = [mean, std]."""

    action_dtype = np.dtype(np.float32)

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.action_shape: tuple[int, ...] = (dims,)

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = params.split(self.dims, -1)
        return mean, std

    def sample(
        self, params: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        mean, std = self._split(params)
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype)
        return mean + std * noise

    def greedy(self, params: torch.Tensor) -> torch.Tensor:
        return self._split(params)[0]

    def score(self, params: torch.Tensor, actions: torch.Tensor) -> ActionScores:
        # Written out rather than through Normal: the same numbers, without building a
        # distribution object per call.
        mean, std = self._split(params)
        log_std = std.log()
        log_prob = -((actions - mean) / std).square() / 2 - log_std - LOG_SQRT_2PI
        entropy = 0.5 + LOG_SQRT_2PI + log_std
        return ActionScores(log_prob.sum(-1), entropy.sum(-1), beyond_bounds(mean))

    def distribution(self, params: torch.Tensor) -> Distribution:
        mean, std = self._split(params)
        return Independent(Normal(mean, std), 1)


def beyond_bounds(mean: torch.Tensor) -> torch.Tensor:
    """Squared distance of a mean past the action bounds [-1, 1], summed over dimensions.

    The loss penalises it because nothing else brings such a mean back: once every sample
    is clipped to the same bound, the return no longer depends on the sample and the policy
    gradient is pure noise (MountainCarContinuous collapsed to a saturated push this way,
    docs/continuous.md). Inside the bounds it is 0, so full torque stays reachable.
    """
    return (mean.abs() - 1).clamp_min(0).square().sum(-1)


class GaussianHead(nn.Module):
    """The core's output -> [mean, std] of a D-dimensional Gaussian policy.

    `std` is "state" (from a linear layer of the state, as in the A3C paper) or "learned"
    (one learned parameter per dimension, whatever the state; SB3's default). Either gives
    a logit that a sigmoid maps into [MIN_STD, MAX_STD]; the paper's softplus has no upper
    bound. Both start at a std of 0.9: actions span the action space's bounds, which the
    env side maps to [-1, 1] (`EnvProfile.env_action`).
    """

    def __init__(self, mean: nn.Module, dims: int, std: str, std_layer: nn.Module | None) -> None:
        super().__init__()
        self.mean = mean
        self.std_kind = std
        if std == "state":
            assert std_layer is not None
            self.std = std_layer
        else:
            self.std_logit = nn.Parameter(torch.zeros(dims))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        mean = self.mean(hidden)
        logit = self.std(hidden) if self.std_kind == "state" else self.std_logit.expand_as(mean)
        std = MIN_STD + (MAX_STD - MIN_STD) * torch.sigmoid(logit + STD_LOGIT_INIT)
        return torch.cat([mean, std], -1)
