"""One worker: sync the shared weights, roll out t_max steps, loss, push gradients, repeat.

Autograd records the encoder as the rollout is played (`ActorCritic.step`); the core and
heads are scored over the whole rollout at once (`ActorCritic.score`). The local weights
stay fixed during a rollout, so the loss is the classic step-by-step A3C loss
(a3c/loss.py). What the loss learns from each env step (clipped rewards, lost lives,
scaled returns) is the reward stage's to say (a3c/rewards.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any

import numpy as np
import torch

from a3c.batches import make_env_batch
from a3c.config import TrainConfig
from a3c.envs import EnvRecipe
from a3c.errors import TrainingDiverged
from a3c.loss import LossAverages, LossTerms, Rollout, a3c_loss, apply_gradients
from a3c.metrics import EpisodeRecord, SkippedUpdate
from a3c.model import State, build_model
from a3c.rewards import RewardStage
from a3c.sharing import NO_LOCK, LockWithParent, ParentGone, SharedObjects, parent_alive

# Updates averaged into one LossStats record: few messages, still a fine-grained curve.
LOSS_REPORT_UPDATES = 20


class Worker:
    """A worker's K environments, local model and recurrent state between updates."""

    def __init__(self, rank: int, config: TrainConfig, shared: SharedObjects) -> None:
        self.rank = rank
        self.config = config
        self.shared = shared
        locks = shared.update_locks
        # Ranks run on across nodes (node n's workers are n*W .. n*W+W-1); locks are local.
        self.update_lock: contextlib.AbstractContextManager[Any] = (
            LockWithParent(locks[rank % len(locks)]) if locks else NO_LOCK
        )
        torch.manual_seed(config.seed + rank)
        np.random.seed(config.seed + rank)
        count = config.envs_per_worker
        self.envs = make_env_batch(
            EnvRecipe.of(config), shared.profile, count, config.workers, f"a3c-worker-{rank}"
        )
        self.nonfinite_in_a_row = 0
        self.stats = LossAverages()
        self.model = build_model(config, shared.profile)
        # NoisyNet: this worker's own noise (its seed differs from every other worker's).
        self.model.sample_noise()
        # Environment seeds never collide across workers: rank r owns r*K .. r*K+K-1.
        self.obs, lives = self.envs.reset(
            [config.seed + rank * count + index for index in range(count)]
        )
        self.state = self.model.initial_state(count)
        self.rewards = RewardStage(config, lives, scaled=self.model.return_norm is not None)

    def close(self) -> None:
        self.envs.close()

    def collect_rollout(self) -> Rollout:
        """Play t_max steps in each environment with the local weights, recorded by autograd."""
        steps, count = self.config.t_max, len(self.obs)
        state = self.state  # carried over from the last rollout, detached from its graph
        features, fed_states = [], []
        carried = torch.ones(steps, count, dtype=torch.bool)
        policy = self.model.actions
        actions: np.ndarray = np.empty(
            (steps, count, *policy.action_shape), dtype=policy.action_dtype
        )
        rewards = np.zeros((steps, count), dtype=np.float32)
        terminal = np.zeros((steps, count), dtype=bool)
        episode_end = np.zeros((steps, count), dtype=bool)
        final_values = np.zeros((steps, count), dtype=np.float32)
        episodes: list[EpisodeRecord] = []
        observations: list[np.ndarray] | None = [] if self.model.obs_norm is not None else None
        returns: list[np.ndarray] = []
        for t in range(steps):
            if observations is not None:
                observations.append(self.obs.copy())
            # A copy: autograd may keep the observations for the backward pass, and an env
            # batch may reuse its observation buffer.
            step = self.model.step(torch.tensor(self.obs), state)
            features.append(step.features)
            fed_states.append(state)
            state = step.state
            actions[t] = step.action.numpy()
            result = self.envs.step(actions[t])
            learned, discounted = self.rewards.step(result)
            rewards[t], terminal[t], episode_end[t] = learned
            if discounted is not None:
                returns.append(discounted)
            for index, final_obs in result.final_observations.items():
                final_values[t, index] = self._value(final_obs, state, index)
            episodes.extend(
                EpisodeRecord(self.rank, 0, score, length) for _, score, length in result.episodes
            )
            for restarted in np.flatnonzero(result.terminated | result.truncated).tolist():
                state = _restart(state, restarted)
                if t + 1 < steps:
                    carried[t + 1, restarted] = False
            self.obs = result.observations
        self.rewards.scale(rewards, self.model.return_norm)
        # Gradients stop at the rollout's edge (truncated backpropagation through time).
        self.state = _detach(state)
        with torch.no_grad():
            _, bootstrap, _ = self.model(torch.from_numpy(self.obs), state)
        return Rollout(
            features=torch.stack(features),
            states=_stack(fed_states),
            carried=carried,
            actions=actions,
            rewards=rewards,
            terminal=terminal,
            episode_end=episode_end,
            final_values=final_values,
            bootstrap_values=bootstrap.numpy(),
            episodes=episodes,
            observations=None if observations is None else np.stack(observations),
            discounted_returns=np.stack(returns) if returns else None,
        )

    def merge_statistics(self, rollout: Rollout) -> None:
        """Add the rollout's observations and returns to the shared running statistics."""
        shared = self.shared.model
        if rollout.observations is None and rollout.discounted_returns is None:
            return
        # Lock-free like the weights, but for several machines (see `update_locks`): two
        # workers merging at once lose or mix one rollout's statistics among millions.
        with self.update_lock:
            if shared.obs_norm is not None and rollout.observations is not None:
                shared.obs_norm.update(rollout.observations)
            if shared.return_norm is not None and rollout.discounted_returns is not None:
                shared.return_norm.update(rollout.discounted_returns)

    @torch.no_grad()
    def _value(self, obs: np.ndarray, state: State, index: int) -> float:
        one_state = (
            None if state is None else (state[0][index : index + 1], state[1][index : index + 1])
        )
        _, value, _ = self.model(torch.from_numpy(obs).unsqueeze(0), one_state)
        return float(value.item())

    def loss(self, rollout: Rollout) -> LossTerms:
        """A3C loss of a rollout: policy gradient, value regression and entropy bonus."""
        scores = self.model.score(
            rollout.features, rollout.states, rollout.carried, torch.from_numpy(rollout.actions)
        )
        return a3c_loss(scores, rollout, self.config)

    def train_once(self) -> int:
        """Sync, one rollout, one update of the shared model; returns the global step count."""
        self.model.load_state_dict(self.shared.model.state_dict())
        rollout = self.collect_rollout()
        self.merge_statistics(rollout)
        terms = self.loss(rollout)
        loss = terms.total
        lr = self.config.learning_rate_at(self.shared.steps_done)
        for group in self.shared.optimizer.param_groups:
            group["lr"] = lr
        grad_norm = apply_gradients(
            self.model,
            self.shared.model,
            self.shared.optimizer,
            loss,
            self.config.max_grad_norm,
            lock=self.update_lock,
        )
        # The noise that played and scored this rollout is done with; the next gets its own.
        self.model.sample_noise()
        total = self.shared.add_steps(len(rollout))
        if math.isfinite(grad_norm):
            self.nonfinite_in_a_row = 0
            self.stats.add(terms, grad_norm, lr)
            if self.stats.updates >= LOSS_REPORT_UPDATES:
                sigmas = self.model.noise_sigmas()
                self.shared.messages.put(self.stats.report(self.rank, total, sigmas))
                self.stats = LossAverages()
        else:
            self.nonfinite_in_a_row += 1
            what = "loss" if not torch.isfinite(loss) else "gradient"
            self.shared.messages.put(SkippedUpdate(self.rank, total, f"non-finite {what}"))
            if self.nonfinite_in_a_row >= self.config.max_nonfinite_updates:
                raise TrainingDiverged(
                    f"worker {self.rank}: {self.nonfinite_in_a_row} updates in a row had a "
                    f"non-finite {what}; the shared weights never received one"
                )
        for episode in rollout.episodes:
            self.shared.add_episode()
            self.shared.messages.put(dataclasses.replace(episode, step=total))
        return total


def _detach(state: State) -> State:
    return None if state is None else (state[0].detach(), state[1].detach())


def _stack(states: list[State]) -> State:
    """Per-step states [B, H] as [T, B, H]; None for a model without an LSTM."""
    pairs = [state for state in states if state is not None]
    if not pairs:
        return None
    return torch.stack([h for h, _ in pairs]), torch.stack([c for _, c in pairs])


def _restart(state: State, index: int) -> State:
    """`state` with environment `index`'s row zeroed, for the first step of a new episode."""
    if state is None:
        return None
    h, c = state[0].clone(), state[1].clone()
    h[index] = 0.0
    c[index] = 0.0
    return h, c


def run_worker(rank: int, config: TrainConfig, shared: SharedObjects) -> None:
    """Entry point of a worker process: train until the budget is spent or stop is set."""
    torch.set_num_threads(1)
    worker = Worker(rank, config, shared)
    try:
        while not shared.stop.is_set() and parent_alive():
            if worker.train_once() >= config.total_steps:
                break
    except ParentGone:
        pass  # as when the loop sees it: nobody is left to report to
    finally:
        worker.close()
