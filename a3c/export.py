"""A trained agent out of a3c: one TorchScript or ONNX graph from observation to action.

The graph is the agent's `act` (a3c/agent.py) for a batch: the saved observation
statistics, one-hot encoding of a Discrete state, the model, the action choice (greedy, or
with ``sample`` the policy's parameters for the caller to sample from), and a continuous
action mapped onto the space's bounds. An LSTM agent's state is an input and an output.
Frames run in float32 whatever `--precision` trained them: bfloat16 is a training speed-up
of this CPU, not part of the agent. A JSON file beside the graph says what goes in and out.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from a3c.agent import Agent, load_agent
from a3c.errors import UsageError
from a3c.model import build_model
from a3c.profile import ONE_HOT

FORMATS = {".onnx": "onnx", ".pt": "torchscript", ".ts": "torchscript"}


class ExportedPolicy(nn.Module):
    """observations [B, ...] (and h, c [B, H]) -> actions [B, ...] (and the next h, c)."""

    low: torch.Tensor
    high: torch.Tensor
    bounded: torch.Tensor

    def __init__(self, agent: Agent, sample: bool = False) -> None:
        super().__init__()
        # The same weights in a float32 model: autocast to bfloat16 has no place in a graph
        # that other runtimes play.
        self.model = build_model(
            dataclasses.replace(agent.config, precision="float32"), agent.profile
        )
        self.model.load_state_dict(agent.model.state_dict())
        self.model.eval()
        self.model.remove_noise()  # NoisyNet: the mean weights
        self.model.requires_grad_(False)  # a graph to play, whatever the caller's grad mode
        self.sample = sample
        profile = agent.profile
        # A Discrete state comes in as its index; a3c's own env gives it one-hot.
        self.space = observation_space(agent)
        self.states = int(self.space.n) if hasattr(self.space, "n") else 0
        self.continuous = profile.continuous
        low, high = np.asarray(profile.action_low), np.asarray(profile.action_high)
        bounded = np.isfinite(low) & np.isfinite(high)
        self.register_buffer(
            "low", torch.as_tensor(np.where(bounded, low, -1.0), dtype=torch.float64)
        )
        self.register_buffer(
            "high", torch.as_tensor(np.where(bounded, high, 1.0), dtype=torch.float64)
        )
        self.register_buffer("bounded", torch.as_tensor(bounded))
        self.action_shape = profile.action_shape or ()

    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> Any:
        if self.states:
            obs = nn.functional.one_hot(obs.long(), self.states).float()
        core_state = (state[0], state[1]) if state else None
        params, _, next_state = self.model(obs, core_state)
        if self.sample:
            out = params
        elif self.continuous:
            mean = self.model.actions.greedy(params)
            # In float64, then float32, as `EnvProfile.env_action` maps it: the same bits.
            clipped = mean.clamp(-1.0, 1.0).double()
            scaled = self.low + (clipped + 1.0) * 0.5 * (self.high - self.low)
            mapped = torch.where(self.bounded, scaled, mean.double()).float()
            out = mapped.reshape(-1, *self.action_shape)
        else:
            out = self.model.actions.greedy(params)
        if next_state is None:
            return out
        return out, next_state[0], next_state[1]


def observation_space(agent: Agent) -> Any:
    """The space of what the graph takes: a Discrete state's own space (its index goes
    in), else the observations of a3c's env (Atari frames preprocessed, and so on)."""
    import gymnasium as gym

    env = agent.make_env()
    own, processed = env.unwrapped.observation_space, env.observation_space
    env.close()
    discrete = agent.profile.observation == ONE_HOT and isinstance(own, gym.spaces.Discrete)
    return own if discrete else processed


def example_inputs(
    agent: Agent, policy: ExportedPolicy, batch: int = 1
) -> tuple[torch.Tensor, ...]:
    """Zeros of the graph's input shapes and types, to trace it with."""
    profile = agent.profile
    if policy.states:
        obs = torch.zeros(batch, dtype=torch.int64)
    else:
        obs = torch.from_numpy(
            np.zeros((batch, *profile.observation_shape), profile.observation_dtype)
        )
    state = agent.model.initial_state(batch)
    return (obs,) if state is None else (obs, *state)


def names(agent: Agent) -> tuple[list[str], list[str]]:
    recurrent = agent.config.lstm
    inputs = ["observation", *(["h", "c"] if recurrent else [])]
    outputs = ["action", *(["next_h", "next_c"] if recurrent else [])]
    return inputs, outputs


def metadata(agent: Agent, policy: ExportedPolicy, form: str, sample: bool) -> dict[str, Any]:
    import a3c

    profile, config = agent.profile, agent.config
    inputs, outputs = names(agent)
    observation: dict[str, Any] = (
        {"shape": ["batch"], "dtype": "int64", "is": "the state's index"}
        if policy.states
        else {
            "shape": ["batch", *profile.observation_shape],
            "dtype": str(profile.observation_dtype),
        }
    )
    hidden: dict[str, Any] = {"shape": ["batch", config.hidden_size], "dtype": "float32"}
    action: dict[str, Any]
    if sample:
        action = {
            "shape": ["batch", "params"],
            "dtype": "float32",
            "is": "logits" if not profile.continuous else "mean and std side by side",
        }
    elif profile.continuous:
        action = {"shape": ["batch", *(profile.action_shape or ())], "dtype": "float32"}
    else:
        action = {"shape": ["batch"], "dtype": "int64"}
    shapes = dict(zip(inputs, [observation, hidden, hidden], strict=False))
    shapes.update(zip(outputs, [action, hidden, hidden], strict=False))
    return {
        "format": form,
        "env": config.env,
        "env_kwargs": config.env_kwargs,
        "wrappers": config.wrappers,
        "max_episode_steps": config.max_episode_steps,
        "observation_kind": profile.observation,
        "observation_space": str(policy.space),
        "action_space": (
            {"low": list(profile.action_low), "high": list(profile.action_high)}
            if profile.continuous
            else {"n": profile.n_actions}
        ),
        "inputs": inputs,
        "outputs": outputs,
        "tensors": shapes,
        "state_size": config.hidden_size if config.lstm else 0,
        "policy": "sample: the caller samples from the parameters" if sample else "greedy",
        "a3c": a3c.__version__,
        "step": agent.checkpoint.get("step"),
        "best_score": agent.checkpoint.get("best_score"),
    }


def export_agent(
    path: str | Path, output: str | Path, form: str | None = None, sample: bool = False
) -> dict[str, Any]:
    """Write the agent in `path` (a checkpoint or a run folder's best.pt) to `output` as
    TorchScript or ONNX (by `form`, else by the suffix), with `output`.json beside it;
    returns that metadata."""
    output = Path(output)
    form = form or FORMATS.get(output.suffix)
    if form not in ("onnx", "torchscript"):
        raise UsageError(f"{output}: give --format onnx or torchscript, or a .onnx or .pt name")
    agent = load_agent(path, greedy=True)
    policy = ExportedPolicy(agent, sample=sample).eval()
    inputs = example_inputs(agent, policy)
    input_names, output_names = names(agent)
    info = metadata(agent, policy, form, sample)
    output.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        if form == "torchscript":
            traced = torch.jit.trace(policy, inputs, check_trace=False)
            torch.jit.save(traced, str(output), _extra_files={"a3c.json": json.dumps(info)})
        else:
            try:
                import onnx
            except ImportError:
                raise UsageError(
                    "ONNX export needs the export extra: pip install 'a3c[export]'"
                ) from None
            torch.onnx.export(
                policy, inputs, str(output), input_names=input_names, output_names=output_names,
                dynamic_axes={name: {0: "batch"} for name in (*input_names, *output_names)},
                dynamo=False, opset_version=17,
            )  # fmt: skip
            model = onnx.load(str(output))
            for key, value in info.items():
                model.metadata_props.add(key=key, value=json.dumps(value))
            onnx.save(model, str(output))
    Path(f"{output}.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


__all__ = ["ExportedPolicy", "export_agent"]
