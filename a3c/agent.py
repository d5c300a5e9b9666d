"""A trained agent out of its checkpoint: `load_agent(path).act(observation, state)`.

The agent plays as the evaluator does: the checkpoint's weights and running statistics,
the recipe's environment (`agent.make_env()`), greedy or sampled actions as the run was
evaluated, NoisyNet layers at their mean weights, and continuous actions mapped onto the
space's bounds. `a3c-eval` builds its model through here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from a3c.checkpoint import load_checkpoint
from a3c.config import TrainConfig
from a3c.envs import EnvRecipe, describe_env, evaluation_env, flattener
from a3c.errors import UsageError
from a3c.model import ActorCritic, State, build_model
from a3c.profile import EnvProfile


@dataclass
class Agent:
    """A loaded agent; `act` gives the evaluator's action and the next recurrent state."""

    model: ActorCritic
    config: TrainConfig
    profile: EnvProfile
    checkpoint: dict[str, Any]  # step, best_score, versions, ...: what the file recorded
    greedy: bool  # the most probable action, else one sampled from the policy
    flatten: Callable[[Any], np.ndarray] | None  # discrete, Tuple or Dict observations

    @property
    def recipe(self) -> EnvRecipe:
        return EnvRecipe.of(self.config)

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """The environment the agent plays, as the evaluator makes it."""
        return evaluation_env(self.recipe, render_mode=render_mode)

    def initial_state(self) -> State:
        """The recurrent state at an episode's start (None without an LSTM)."""
        return self.model.initial_state(1)

    def observation(self, observation: Any) -> np.ndarray:
        """An observation of `make_env()`'s env as the model reads it. Discrete, Tuple and
        Dict observations may also come as the environment itself gives them: they are
        one-hot encoded and flattened here."""
        expected = self.profile.observation_shape
        if isinstance(observation, np.ndarray) and observation.shape == expected:
            return observation
        if self.flatten is not None:
            return self.flatten(observation)
        shape = np.shape(observation)
        raise UsageError(
            f"{self.profile.env_id}: an observation of shape {shape}, where the agent reads "
            f"{expected} (make its env with agent.make_env())"
        )

    @torch.no_grad()
    def act(
        self, observation: Any, state: State = None, generator: torch.Generator | None = None
    ) -> tuple[Any, State]:
        """The action for one observation, as the env takes it, and the next state.

        Start an episode with ``state=None``; pass the returned state back at each step. A
        sampled action draws from `generator` where given (the evaluator seeds one per
        episode: seed + 1,000,000 + episode).
        """
        if state is None:
            state = self.initial_state()
        batch = torch.as_tensor(self.observation(observation)).unsqueeze(0)
        generators = None if generator is None else [generator]
        action, state = self.model.act(batch, state, greedy=self.greedy, generators=generators)
        return self.profile.env_action(action[0].numpy()), state


def load_agent(path: str | Path, greedy: bool | None = None) -> Agent:
    """The agent in a checkpoint, or in a run folder's best.pt; `greedy` overrides how the
    run was evaluated (`--eval-policy`). `UsageError` for a file that is not one."""
    checkpoint = load_checkpoint(path)
    config = TrainConfig.from_dict(checkpoint["config"], source=f"{path} config")
    recipe = EnvRecipe.of(config)
    profile = describe_env(recipe)
    model = build_model(config, profile)
    try:
        model.load_state_dict(checkpoint["model"])
    except (RuntimeError, KeyError) as error:
        raise UsageError(f"{path}: weights do not fit the model its config describes") from error
    model.eval()
    model.remove_noise()
    env = evaluation_env(recipe)
    flatten = flattener(env)
    env.close()
    info = {key: value for key, value in checkpoint.items() if key not in ("model", "optimizer")}
    playing_greedy = config.eval_policy == "greedy" if greedy is None else greedy
    return Agent(model, config, profile, info, playing_greedy, flatten)
