"""NoisyNet layers (Fortunato et al., "Noisy Networks for Exploration", ICLR 2018).

A `NoisyLinear` layer's weights are mu + sigma * epsilon: mu and sigma are learned, epsilon
is a noise sample. epsilon lives in non-persistent buffers, so it belongs to one model
only: `load_state_dict` from the shared model never overwrites a worker's sample with
another's, checkpoints carry mu and sigma but no noise, and the optimiser never sees it.

A worker draws one sample per rollout and keeps it for the rollout's play and for the
re-scoring of that rollout in the loss; a new model, and `remove_noise`, hold epsilon at
zero, which leaves exactly the mean weights mu (what evaluation plays by default).
"""

from __future__ import annotations

import math

import torch
from torch import nn

NOISE_KINDS = ("independent", "factorised")

# The paper's initial sigma: 0.017 for independent noise (the A3C choice) and
# sigma_0 / sqrt(inputs) with sigma_0 = 0.5 for factorised noise.
DEFAULT_SIGMA_INIT = {"independent": 0.017, "factorised": 0.5}


class NoisyLinear(nn.Module):
    """`nn.Linear` with learned Gaussian noise on its weights and biases.

    `noise` is "independent" (one Gaussian per weight and bias; mu ~ U[-sqrt(3/p),
    sqrt(3/p)], sigma = sigma_init) or "factorised" (epsilon_ij = f(eps_out_i) f(eps_in_j)
    with f(x) = sgn(x) sqrt(|x|); mu ~ U[-1/sqrt(p), 1/sqrt(p)], sigma = sigma_init /
    sqrt(p)), where p is the number of inputs.
    """

    def __init__(
        self, in_features: int, out_features: int, noise: str, sigma_init: float | None = None
    ) -> None:
        super().__init__()
        if noise not in NOISE_KINDS:
            raise ValueError(f"noise must be one of {', '.join(NOISE_KINDS)} (got {noise!r})")
        self.in_features = in_features
        self.out_features = out_features
        self.noise = noise
        self.sigma_init = DEFAULT_SIGMA_INIT[noise] if sigma_init is None else sigma_init
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("weight_epsilon", torch.zeros(out_features, in_features), False)
        self.register_buffer("bias_epsilon", torch.zeros(out_features), False)
        self.reset_parameters()

    weight_epsilon: torch.Tensor
    bias_epsilon: torch.Tensor

    def reset_parameters(self) -> None:
        inputs = self.in_features
        if self.noise == "independent":
            bound, sigma = math.sqrt(3 / inputs), self.sigma_init
        else:
            bound, sigma = 1 / math.sqrt(inputs), self.sigma_init / math.sqrt(inputs)
        with torch.no_grad():
            for mu in (self.weight_mu, self.bias_mu):
                mu.uniform_(-bound, bound)
            for spread in (self.weight_sigma, self.bias_sigma):
                spread.fill_(sigma)

    @torch.no_grad()
    def sample_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw a new epsilon; it stays until the next call."""
        if self.noise == "independent":
            self.weight_epsilon.normal_(generator=generator)
            self.bias_epsilon.normal_(generator=generator)
            return
        noise_in = _signed_sqrt(torch.randn(self.in_features, generator=generator))
        noise_out = _signed_sqrt(torch.randn(self.out_features, generator=generator))
        self.weight_epsilon.copy_(torch.outer(noise_out, noise_in))
        self.bias_epsilon.copy_(noise_out)

    @torch.no_grad()
    def remove_noise(self) -> None:
        """epsilon = 0: the layer computes with its mean weights mu exactly."""
        self.weight_epsilon.zero_()
        self.bias_epsilon.zero_()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        weight = self.weight_mu + self.weight_sigma * self.weight_epsilon
        bias = self.bias_mu + self.bias_sigma * self.bias_epsilon
        return nn.functional.linear(inputs, weight, bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"noise={self.noise}, sigma_init={self.sigma_init}"
        )


def _signed_sqrt(x: torch.Tensor) -> torch.Tensor:
    return x.sign() * x.abs().sqrt()


def noisy_layers(model: nn.Module) -> dict[str, NoisyLinear]:
    """The model's noisy layers by module name ("policy", "value", "dense.0", ...)."""
    return {
        name: module for name, module in model.named_modules() if isinstance(module, NoisyLinear)
    }


def mean_abs_sigma(layers: list[NoisyLinear]) -> float:
    """Mean |sigma| over the weights and biases of `layers`: how much noise they kept."""
    with torch.no_grad():
        sigmas = [p for layer in layers for p in (layer.weight_sigma, layer.bias_sigma)]
        return float(sum(p.abs().sum() for p in sigmas)) / sum(p.numel() for p in sigmas)
