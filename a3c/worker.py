"""One worker: sync the shared weights, roll out up to t_max steps, push gradients, repeat.

The rollout itself runs without autograd; the model then re-scores the whole rollout in
one batched pass with gradients (`ActorCritic.evaluate_actions`). Because the local weights
do not change during a rollout, this gives exactly the loss and gradients of the classic
step-by-step version, at a fraction of the autograd bookkeeping.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from a3c.config import TrainConfig
from a3c.envs import EnvInfo, make_env
from a3c.metrics import EpisodeRecord
from a3c.model import ActorCritic, State, build_model
from a3c.returns import gae, n_step_returns


@dataclass
class SharedObjects:
    """What the main process shares with every child process."""

    model: ActorCritic
    optimizer: torch.optim.Optimizer
    step_counter: Any  # multiprocessing.Value("q"): agent steps done by all workers
    episode_counter: Any  # multiprocessing.Value("q"): training episodes finished
    stop: Any  # multiprocessing.Event: set to make every child stop at its next boundary
    messages: Any  # queue of EpisodeRecord / EvalRecord for the main process

    def add_steps(self, steps: int) -> int:
        """Count a rollout's steps in the global counter; return the new total."""
        with self.step_counter.get_lock():
            self.step_counter.value += steps
            return int(self.step_counter.value)

    def add_episode(self) -> None:
        with self.episode_counter.get_lock():
            self.episode_counter.value += 1

    @property
    def steps_done(self) -> int:
        return int(self.step_counter.value)

    @property
    def episodes_done(self) -> int:
        return int(self.episode_counter.value)


def apply_gradients(
    local_model: torch.nn.Module,
    shared_model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    max_grad_norm: float,
) -> float:
    """Backpropagate `loss` locally and step the shared optimiser with exactly its gradient.

    The shared parameters' ``.grad`` is pointed at this update's local gradients every time.
    Local gradients are cleared (set to None) before each backward, so nothing accumulates
    across updates. The classic ``ensure_shared_grads`` skipped the hand-over once a shared
    grad existed, which on torch >= 2.0 fed the optimiser running sums of gradients.
    Returns the gradient norm before clipping.
    """
    local_model.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(local_model.parameters(), max_grad_norm)
    for shared, local in zip(shared_model.parameters(), local_model.parameters(), strict=True):
        shared.grad = local.grad
    optimizer.step()
    return float(grad_norm)


def _as_batch(obs: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(obs).unsqueeze(0)


@dataclass
class Rollout:
    """Up to t_max steps of one episode, as the loss needs them."""

    observations: np.ndarray  # [T, ...] as the environment returned them
    actions: list[int]
    rewards: list[float]  # the rewards learned from: clipped when the config says so
    start_state: State  # recurrent state before the first observation, detached
    terminal: bool  # bootstrap nothing after the last step
    bootstrap_value: float  # V(observation after the last step); unused when terminal
    episode: EpisodeRecord | None  # the real score, when the episode ended here

    def __len__(self) -> int:
        return len(self.actions)


class Worker:
    """A worker's environment, local model and recurrent state between updates."""

    def __init__(self, rank: int, config: TrainConfig, shared: SharedObjects) -> None:
        self.rank = rank
        self.config = config
        self.shared = shared
        self.seed = config.seed + rank
        torch.manual_seed(self.seed)
        np.random.seed(self.seed)
        self.env = make_env(config.env, frame_size=config.frame_size)
        self.model = build_model(config, EnvInfo.of(self.env))
        self.obs: np.ndarray | None = None
        self.state: State = None
        self.lives = 0
        self._first_reset = True

    def close(self) -> None:
        self.env.close()

    def _start_episode(self) -> None:
        seed = self.seed if self._first_reset else None
        self._first_reset = False
        self.obs, info = self.env.reset(seed=seed)
        self.state = self.model.initial_state()
        self.lives = int(info.get("lives", 0))

    @torch.no_grad()
    def collect_rollout(self) -> Rollout:
        """Play up to t_max steps with the local weights, stopping at an episode's end.

        With `life_loss_terminal`, a lost life also ends the rollout as a terminal for
        learning, while the episode itself, and its logged score, runs on to game over.
        """
        config = self.config
        if self.obs is None:
            self._start_episode()
        assert self.obs is not None
        start_state = self.state  # from the last rollout without autograd: already detached
        observations, actions, rewards = [], [], []
        terminal = episode_over = False
        info: dict[str, Any] = {}
        for _ in range(config.t_max):
            action_tensor, next_state = self.model.act(_as_batch(self.obs), self.state)
            action = int(action_tensor.item())
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            observations.append(self.obs)
            actions.append(action)
            reward = float(reward)
            rewards.append(min(max(reward, -1.0), 1.0) if config.clip_rewards else reward)
            self.obs, self.state = next_obs, next_state
            lives = int(info.get("lives", 0))
            life_lost = config.life_loss_terminal and lives < self.lives
            self.lives = lives
            # A truncation is not a terminal: the final observation still has a value.
            terminal = terminated or life_lost
            episode_over = terminated or truncated
            if terminal or episode_over:
                break
        bootstrap = 0.0
        if not terminal:
            _, value, _ = self.model(_as_batch(self.obs), self.state)
            bootstrap = float(value.item())
        episode = None
        if episode_over:
            self.obs = None
            stats = info["episode"]
            episode = EpisodeRecord(self.rank, 0, float(stats["r"]), int(stats["l"]))
        return Rollout(
            observations=np.stack(observations),
            actions=actions,
            rewards=rewards,
            start_state=start_state,
            terminal=terminal,
            bootstrap_value=bootstrap,
            episode=episode,
        )

    def loss(self, rollout: Rollout) -> torch.Tensor:
        """A3C loss of a rollout, re-scored in one batched pass with gradients."""
        config = self.config
        scored = self.model.evaluate_actions(
            torch.as_tensor(rollout.observations).unsqueeze(1),
            torch.as_tensor(rollout.actions).unsqueeze(1),
            rollout.start_state,
        )
        values = scored.values
        rewards = torch.as_tensor(rollout.rewards, dtype=torch.float32).unsqueeze(1)
        next_values = torch.cat([values[1:].detach(), torch.tensor([[rollout.bootstrap_value]])])
        # A rollout never spans two episodes, so only its last step can be terminal.
        terminal = torch.zeros_like(rewards)
        terminal[-1] = float(rollout.terminal)
        episode_end = terminal
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
        policy_loss = -(advantages * scored.log_probs).mean()
        value_loss = F.mse_loss(values, returns)
        entropy = scored.entropies.mean()
        return policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy

    def train_once(self) -> int:
        """Sync, one rollout, one update of the shared model; returns the global step count."""
        self.model.load_state_dict(self.shared.model.state_dict())
        rollout = self.collect_rollout()
        loss = self.loss(rollout)
        lr = self.config.learning_rate_at(self.shared.steps_done)
        for group in self.shared.optimizer.param_groups:
            group["lr"] = lr
        apply_gradients(
            self.model, self.shared.model, self.shared.optimizer, loss, self.config.max_grad_norm
        )
        total = self.shared.add_steps(len(rollout))
        if rollout.episode is not None:
            self.shared.add_episode()
            self.shared.messages.put(dataclasses.replace(rollout.episode, step=total))
        return total


def parent_alive() -> bool:
    """False once the process that started this one has died, however it died."""
    parent = mp.parent_process()
    return parent is None or parent.is_alive()


def run_worker(rank: int, config: TrainConfig, shared: SharedObjects) -> None:
    """Entry point of a worker process: train until the budget is spent or stop is set."""
    torch.set_num_threads(1)
    worker = Worker(rank, config, shared)
    try:
        while not shared.stop.is_set() and parent_alive():
            if worker.train_once() >= config.total_steps:
                break
    finally:
        worker.close()
