"""`ActorCritic`: encoder -> core (LSTM cell, or a dense layer for A3C FF) -> policy and value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from a3c.errors import UsageError
from a3c.host import bfloat16_frames
from a3c.lstm import lstm_over_rollout
from a3c.noisy import NoisyLinear, mean_abs_sigma, noisy_layers
from a3c.normalize import RunningMeanStd
from a3c.policy import ActionDistribution, CategoricalActions, GaussianActions, GaussianHead

if TYPE_CHECKING:
    from a3c.config import TrainConfig
    from a3c.profile import EnvProfile

# The recurrent state (h, c) of the LSTM core; None for the feed-forward core.
State = tuple[torch.Tensor, torch.Tensor] | None


class Step(NamedTuple):
    """One step of the policy for a batch [B], as a worker's rollout records it."""

    action: torch.Tensor  # [B, *action_shape] sampled, no gradient
    features: torch.Tensor  # [B, F] the encoder's output, recorded by autograd
    state: State  # the core's next state, no gradient


class Scores(NamedTuple):
    """What the A3C loss needs of a rollout's steps [T, B], all with gradients."""

    log_prob: torch.Tensor  # log pi(action taken)
    entropy: torch.Tensor
    value: torch.Tensor
    beyond_bounds: torch.Tensor  # a Gaussian mean's squared excess past the bounds; 0 otherwise


# Below one grey level of spread a frame counts as flat (uint8 units).
FLAT_FRAME_STD = 1.0


def _init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class Noise(NamedTuple):
    """Which layers of a model are NoisyNet layers, and their noise."""

    kind: str  # "independent" or "factorised" (a3c/noisy.py)
    sigma_init: float | None  # None: the kind's default
    dense: bool  # the dense layers before the heads too, not only the heads


def _dense(inputs: int, outputs: int, gain: float, noise: Noise | None) -> nn.Linear | NoisyLinear:
    """A dense layer: orthogonal with `gain`, or a NoisyLinear with the paper's initialisation."""
    if noise is not None:
        return NoisyLinear(inputs, outputs, noise.kind, noise.sigma_init)
    return _init_linear(nn.Linear(inputs, outputs), gain)


class VectorEncoder(nn.Module):
    """Observations of any shape, flattened -> one dense layer."""

    def __init__(self, input_size: int, output_size: int, noise: Noise | None = None) -> None:
        super().__init__()
        self.output_size = output_size
        self.layer = _dense(input_size, output_size, math.sqrt(2), noise)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layer(obs.flatten(1).float()))


class ConvEncoder(nn.Module):
    """uint8 frames [N, H, W] -> features; the frames are standardised here, not in the env.

    Each frame is shifted and scaled to mean 0 and standard deviation 1 over its own
    pixels. Atari frames are mostly flat background: scaled to [0, 1] alone, Pong's paddles
    stand 0.12 above the background and the ball is a fraction of one pixel, so the first
    layer barely sees what matters. Standardising gives the objects unit-scale contrast
    whatever the game's palette (pytorch-a3c normalises frames for the same reason, with
    running averages; per frame needs no state to share or save).
    """

    def __init__(self, layers: nn.Sequential, frame_size: int, bfloat16: bool = False) -> None:
        super().__init__()
        self.layers = layers
        self.in_bfloat16 = bfloat16
        for module in layers:
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.orthogonal_(module.weight, math.sqrt(2))
                assert module.bias is not None
                nn.init.zeros_(module.bias)
        # oneDNN's convolutions run natively on channels-last tensors; kept in PyTorch's
        # default layout, the layers pay for reordering each way.
        # (Module.to takes memory_format, as documented; its type stubs do not say so.)
        self.layers.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        with torch.no_grad():
            self.output_size = int(self.layers(torch.zeros(1, 1, frame_size, frame_size)).shape[1])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        pixels = obs.flatten(1).float()
        # Two plain passes rather than torch.std_mean: the same unbiased estimate, and on
        # CPU cheaper for a batch of small frames than std_mean's single-pass kernel.
        centred = pixels - pixels.mean(1, keepdim=True)
        std = (centred.square().sum(1, keepdim=True) / (pixels.shape[1] - 1)).sqrt()
        # A flat frame (a blank screen) has no contrast to stretch: it stays all zeros.
        standardised = centred / std.clamp_min(FLAT_FRAME_STD)
        frames = standardised.view(obs.shape[0], 1, *obs.shape[1:])
        # Weights and gradients stay float32; only the layers' arithmetic is bfloat16.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.in_bfloat16):
            features = self.layers(frames)
        return features.float()


# Activations after the 42x42 encoder's convolutions, by --conv-activation.
CONV_ACTIVATIONS: dict[str, type[nn.Module]] = {"elu": nn.ELU, "relu": nn.ReLU}


def a3c_conv_encoder(channels: int, bfloat16: bool = False, activation: str = "elu") -> ConvEncoder:
    """42x42 frames, four 3x3 stride-2 convolutions (pytorch-a3c's: 32 channels and ELU).

    ReLU costs less: in a one-off timing of a worker's encoder (16 frames per step, 10
    steps, forward and backward, bfloat16), 0.145 against 0.19 ms per frame with ELU.
    """
    layers: list[nn.Module] = []
    for in_channels in (1, channels, channels, channels):
        conv = nn.Conv2d(in_channels, channels, 3, stride=2, padding=1)
        layers += [conv, CONV_ACTIVATIONS[activation]()]
    return ConvEncoder(nn.Sequential(*layers, nn.Flatten()), frame_size=42, bfloat16=bfloat16)


def paper_conv_encoder(bfloat16: bool = False) -> ConvEncoder:
    """84x84 frames: the A3C paper's 16 8x8/4 and 32 4x4/2 convolutions, then 256 units."""
    return ConvEncoder(
        nn.Sequential(
            nn.Conv2d(1, 16, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(16, 32, 4, stride=2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * 9 * 9, 256),
            nn.ReLU(),
        ),
        frame_size=84,
        bfloat16=bfloat16,
    )


def make_encoder(
    observation_shape: tuple[int, ...],
    frames: bool,
    hidden_size: int,
    conv_channels: int,
    noise: Noise | None = None,
    bfloat16_frames: bool = False,
    conv_activation: str = "elu",
) -> VectorEncoder | ConvEncoder:
    """The encoder for an observation: conv for `frames` (42x42 or 84x84), dense otherwise.

    `noise` makes the vector encoder's dense layer noisy; convolutions never are.
    `bfloat16_frames` runs a conv encoder's layers in bfloat16; a vector encoder ignores it.
    `conv_activation` follows each convolution on 42x42 frames (84x84 has the paper's ReLU).
    """
    if not frames:
        return VectorEncoder(math.prod(observation_shape), hidden_size, noise)
    if observation_shape == (42, 42):
        return a3c_conv_encoder(conv_channels, bfloat16_frames, conv_activation)
    if observation_shape == (84, 84):
        return paper_conv_encoder(bfloat16_frames)
    raise ValueError(f"no encoder for observations of shape {observation_shape}")


class ActorCritic(nn.Module):
    """Shared-trunk actor-critic for vector observations or Atari frames.

    Discrete actions: `n_actions` logits. Continuous ones (`continuous`): a Gaussian over
    `n_actions` dimensions, its standard deviation from the state or learned per dimension
    (`policy_std`, a3c/policy.py).

    With `noise`, the policy and value heads (and with `noise.dense` the vector encoder and
    the feed-forward core) are NoisyLinear layers. A new model holds their noise at zero:
    it plays its mean weights until `sample_noise` is called.

    `frames`: observations are frames [H, W] for a conv encoder; else flat vectors for a
    dense one.
    `bfloat16_frames`: a conv encoder computes in bfloat16 (its weights stay float32).
    `conv_activation`: "elu" or "relu" after each convolution on 42x42 frames.
    """

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        n_actions: int,
        hidden_size: int = 128,
        frames: bool = False,
        lstm: bool = True,
        conv_channels: int = 32,
        normalize_obs: bool = False,
        scale_rewards: bool = False,
        noise: Noise | None = None,
        continuous: bool = False,
        policy_std: str = "state",
        bfloat16_frames: bool = False,
        conv_activation: str = "elu",
    ) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        # Buffers, not parameters: shared, copied and checkpointed with the weights, never
        # optimised (a3c/normalize.py).
        self.obs_norm = RunningMeanStd(observation_shape) if normalize_obs else None
        self.return_norm = RunningMeanStd() if scale_rewards else None
        dense_noise = noise if noise is not None and noise.dense else None
        self.encoder = make_encoder(
            observation_shape,
            frames,
            hidden_size,
            conv_channels,
            dense_noise,
            bfloat16_frames,
            conv_activation,
        )
        features = self.encoder.output_size
        self.lstm: nn.LSTMCell | None = None
        self.dense: nn.Sequential | None = None
        if lstm:
            self.lstm = nn.LSTMCell(features, hidden_size)
            nn.init.zeros_(self.lstm.bias_ih)
            nn.init.zeros_(self.lstm.bias_hh)
        else:
            self.dense = nn.Sequential(
                _dense(features, hidden_size, math.sqrt(2), dense_noise), nn.Tanh()
            )
        # Small policy weights start the agent near the uniform policy (for a Gaussian:
        # mean near 0, the middle of the action space).
        self.actions: ActionDistribution
        if continuous:
            self.actions = GaussianActions(n_actions)
            std_layer = (
                _dense(hidden_size, n_actions, 0.01, noise) if policy_std == "state" else None
            )
            self.policy: nn.Module = GaussianHead(
                _dense(hidden_size, n_actions, 0.01, noise), n_actions, policy_std, std_layer
            )
        else:
            self.actions = CategoricalActions()
            self.policy = _dense(hidden_size, n_actions, 0.01, noise)
        self.value = _dense(hidden_size, 1, 1.0, noise)

    @property
    def frame_arithmetic(self) -> str | None:
        """ "bfloat16" or "float32" for a frame encoder's layers; None without frames."""
        if not isinstance(self.encoder, ConvEncoder):
            return None
        return "bfloat16" if self.encoder.in_bfloat16 else "float32"

    def sample_noise(self, generator: torch.Generator | None = None) -> None:
        """A new noise sample for every noisy layer, kept until the next call."""
        for layer in noisy_layers(self).values():
            layer.sample_noise(generator)

    def remove_noise(self) -> None:
        """Noisy layers back to their mean weights."""
        for layer in noisy_layers(self).values():
            layer.remove_noise()

    def noise_sigmas(self) -> dict[str, float]:
        """Mean |sigma| of the noisy layers by part: "encoder", "core", "policy", "value"."""
        parts = {"encoder": "encoder", "dense": "core", "policy": "policy", "value": "value"}
        grouped: dict[str, list[NoisyLinear]] = {}
        for name, layer in noisy_layers(self).items():
            grouped.setdefault(parts[name.split(".")[0]], []).append(layer)
        return {part: mean_abs_sigma(layers) for part, layers in grouped.items()}

    def initial_state(self, batch_size: int = 1) -> State:
        """Zero LSTM state for the start of an episode (None for the feed-forward core)."""
        if self.lstm is None:
            return None
        zeros = torch.zeros(batch_size, self.hidden_size)
        return zeros, zeros.clone()

    def _core(self, features: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        if self.lstm is None:
            assert self.dense is not None
            return self.dense(features), None
        h, c = self.lstm(features, state)
        return h, (h, c)

    def _encode(self, obs: torch.Tensor) -> torch.Tensor:
        if self.obs_norm is not None:
            obs = self.obs_norm.normalize(obs)
        return self.encoder(obs)

    def _hidden(self, obs: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        return self._core(self._encode(obs), state)

    def forward(self, obs: torch.Tensor, state: State) -> tuple[torch.Tensor, torch.Tensor, State]:
        """Policy parameters [B, P] (logits, or a Gaussian's mean and std) and values [B]."""
        hidden, state = self._hidden(obs, state)
        return self.policy(hidden), self.value(hidden).squeeze(-1), state

    def act(
        self,
        obs: torch.Tensor,
        state: State,
        greedy: bool = False,
        generators: Sequence[torch.Generator] | None = None,
    ) -> tuple[torch.Tensor, State]:
        """Actions [B, ...] for observations [B, ...]: sampled, or the most probable if greedy.

        With `generators`, one per row, row i's sample is drawn from generators[i] alone,
        so an evaluation episode plays the same whichever episodes share its batch.
        """
        hidden, state = self._hidden(obs, state)
        params = self.policy(hidden)
        if greedy:
            return self.actions.greedy(params), state
        if generators is None:
            return self.actions.sample(params), state
        rows = [
            self.actions.sample(params[row : row + 1], generator)
            for row, generator in enumerate(generators)
        ]
        return torch.cat(rows), state

    def step(self, obs: torch.Tensor, state: State) -> Step:
        """Sample actions for observations [B, ...]; autograd records only the encoder.

        The core and the heads run without gradients here and again in `score`, batched
        over the whole rollout, once its states are known: per step, the LSTM's backward
        pass would multiply and accumulate its full weight gradients T times over.
        """
        features = self._encode(obs)
        with torch.no_grad():
            hidden, state = self._core(features, state)
            action = self.actions.sample(self.policy(hidden))
        return Step(action, features, state)

    def score(
        self,
        features: torch.Tensor,
        states: State,
        carried: torch.Tensor,
        actions: torch.Tensor,
    ) -> Scores:
        """Log-probabilities, entropies and values of a rollout's actions [T, B], with gradients.

        `features` [T, B, F] are the steps' encoder outputs, `states` the core states [T, B, H]
        each step was fed, and `carried` [T, B] says where a step's state was the previous
        step's output (False where a new episode zeroed it), so that gradients flow back
        through time exactly as in a step-by-step pass.
        """
        if self.lstm is None:
            assert self.dense is not None
            hidden = self.dense(features)
        else:
            assert states is not None
            hidden = lstm_over_rollout(self.lstm, features, states, carried)
        scores = self.actions.score(self.policy(hidden), actions)
        return Scores(
            scores.log_prob, scores.entropy, self.value(hidden).squeeze(-1), scores.beyond_bounds
        )


def build_model(config: TrainConfig, profile: EnvProfile) -> ActorCritic:
    """The model a config asks for, sized for an environment."""
    model = ActorCritic(
        profile.observation_shape,
        profile.n_actions,
        hidden_size=config.hidden_size,
        frames=profile.frames,
        lstm=config.lstm,
        conv_channels=config.conv_channels,
        normalize_obs=config.normalize_obs and profile.normalizes_observations,
        scale_rewards=config.scale_rewards,
        noise=Noise(config.noise, config.sigma_init, config.noisy_dense) if config.noisy else None,
        continuous=profile.continuous,
        policy_std=config.policy_std,
        bfloat16_frames=bfloat16_frames(config.precision),
        conv_activation=config.conv_activation,
    )
    if config.noisy_dense and not {"encoder", "core"} & model.noise_sigmas().keys():
        raise UsageError(
            "--noisy-dense: this model has no dense layer before its heads (frames into an "
            "LSTM core); drop the flag or use --no-lstm"
        )
    return model
