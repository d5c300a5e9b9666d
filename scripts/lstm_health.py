"""Does a checkpoint's LSTM still respond to what it sees, or have its gates saturated?

    python scripts/lstm_health.py runs/reference/PongNoFrameskip-v4-*/checkpoints/latest.pt

Plays `--steps` random actions in the checkpoint's environment, feeds the frames through the
model, and prints, beside a freshly initialised model of the same shape:

- how large the encoder's features are, and how much of them changes from frame to frame;
- the mean size of the LSTM's gate pre-activations (beyond about 5 a sigmoid or tanh is flat,
  so almost no gradient passes);
- how much the LSTM output changes over time. Near 0 means the policy and value no longer
  depend on the frames: the model has collapsed to constants and will not recover.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from a3c.checkpoint import load_checkpoint
from a3c.config import TrainConfig
from a3c.envs import EnvRecipe, describe_env, make_env
from a3c.model import ActorCritic, build_model


def frames_of_random_play(env_id: str, frame_size: int, steps: int) -> torch.Tensor:
    env = make_env(EnvRecipe(env_id, frame_size=frame_size))
    obs, _ = env.reset(seed=1)
    env.action_space.seed(1)
    frames = []
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        frames.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return torch.from_numpy(np.stack(frames))


@torch.no_grad()
def health(model: ActorCritic, frames: torch.Tensor) -> dict[str, float]:
    if model.lstm is None:
        raise SystemExit("this checkpoint's model has no LSTM (trained with --no-lstm)")
    features = model.encoder(frames)
    gates = features @ model.lstm.weight_ih.T + model.lstm.bias_ih
    state = model.initial_state(1)
    outputs = []
    for t in range(len(frames)):
        hidden, cell = model.lstm(features[t : t + 1], state)
        state = (hidden, cell)
        outputs.append(hidden[0])
    hidden_over_time = torch.stack(outputs)[len(frames) // 4 :]  # past the start-up
    return {
        "feature size": float(features.abs().mean()),
        "feature change over time": float(features.std(0).mean()),
        "gate pre-activation size": float(gates.abs().mean()),
        "LSTM output change over time": float(hidden_over_time.std(0).mean()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()

    torch.set_num_threads(1)
    checkpoint = load_checkpoint(args.checkpoint)
    config = TrainConfig.from_dict(checkpoint["config"])
    frames = frames_of_random_play(config.env, config.frame_size, args.steps)
    info = describe_env(EnvRecipe.of(config))
    torch.manual_seed(config.seed)
    fresh = build_model(config, info)
    trained = build_model(config, info)
    trained.load_state_dict(checkpoint["model"])
    before, after = health(fresh, frames), health(trained, frames)
    print(f"{args.checkpoint} (step {checkpoint['step']:,})")
    print(f"{'':32} {'fresh model':>12} {'checkpoint':>12}")
    for name in before:
        print(f"{name:32} {before[name]:12.4f} {after[name]:12.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
