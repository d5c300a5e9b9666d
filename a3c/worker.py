"""One worker: sync the shared weights, roll out up to t_max steps, push gradients, repeat.

Autograd records the encoder as the rollout is played (`ActorCritic.step`); the core and
heads are scored over the whole rollout at once (`ActorCritic.score`). The local weights
stay fixed during a rollout, so the loss is the classic step-by-step A3C loss.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import multiprocessing as mp
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from a3c.config import TrainConfig
from a3c.envs import make_env_batch
from a3c.metrics import EpisodeRecord, LossStats, SkippedUpdate
from a3c.model import ActorCritic, Scores, State, build_model
from a3c.normalize import REWARD_CLIP, DiscountedReturns
from a3c.returns import gae, n_step_returns
from a3c.sharing import (
    MAIN_SLOT,
    Flag,
    LockWithParent,
    ParentGone,
    SlotCounter,
    acquire_unless_dead,
    parent_alive,
)


@dataclass
class SharedObjects:
    """What the main process shares with every child process (a3c/sharing.py: none of it
    is a lock that two children take, so a child killed anywhere cannot stall the rest)."""

    model: ActorCritic
    optimizer: torch.optim.Optimizer
    step_counter: SlotCounter  # agent steps done by all workers
    episode_counter: SlotCounter  # training episodes finished
    stop: Flag  # set to make every child stop at its next boundary
    messages: Any  # where this process's EpisodeRecord / EvalRecord / ... go: `put(record)`
    # This process's slot in the counters: MAIN_SLOT in the main process (and in a serial
    # run's worker), 1 + its local index in a worker.
    slot: int = MAIN_SLOT
    # Several machines only: one lock per local worker, held around its optimiser step and
    # statistics merge, so a meeting of the nodes (holding them all) never reads or writes
    # a half-stepped parameter. Only that worker and the main process take it, and a
    # restarted worker gets a new one.
    update_locks: list[Any] = dataclasses.field(default_factory=list)

    @classmethod
    def create(
        cls,
        model: ActorCritic,
        optimizer: torch.optim.Optimizer,
        messages: Any,
        workers: int,
        *,
        context: Any = mp,
        steps: int = 0,
        episodes: int = 0,
        update_locks: bool = False,
    ) -> SharedObjects:
        slots = 1 + workers
        return cls(
            model=model,
            optimizer=optimizer,
            step_counter=SlotCounter(context, slots, steps),
            episode_counter=SlotCounter(context, slots, episodes),
            stop=Flag(context),
            messages=messages,
            update_locks=[context.Lock() for _ in range(workers)] if update_locks else [],
        )

    def add_steps(self, steps: int) -> int:
        """Count a rollout's steps in the global counter; return the new total."""
        return self.step_counter.add(self.slot, steps)

    @contextlib.contextmanager
    def updates_paused(self, worker_alive: Callable[[int], bool] | None = None) -> Iterator[None]:
        """No optimiser step or statistics merge runs inside: it holds every update lock
        (several machines only; on one machine there are none and this waits for nothing).

        The lock of a worker that `worker_alive(index)` says has died is passed over: it
        may have died holding it, and it steps nothing more (its restart gets a new lock).
        """
        held = []
        try:
            for index, lock in enumerate(self.update_locks):
                alive = functools.partial(worker_alive or (lambda _: True), index)
                if acquire_unless_dead(lock, alive):
                    held.append(lock)
            yield
        finally:
            for lock in held:
                lock.release()

    def add_episode(self) -> None:
        self.episode_counter.add(self.slot, 1)

    @property
    def steps_done(self) -> int:
        return self.step_counter.total

    @property
    def episodes_done(self) -> int:
        return self.episode_counter.total


# One machine: updates take no lock (Hogwild); `update_locks` serve several machines.
NO_LOCK = contextlib.nullcontext()


def apply_gradients(
    local_model: torch.nn.Module,
    shared_model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    max_grad_norm: float,
    lock: contextlib.AbstractContextManager[Any] = NO_LOCK,
) -> float:
    """Backpropagate `loss` locally and step the shared optimiser with exactly its gradient.

    The shared parameters' ``.grad`` is pointed at this update's local gradients every time.
    Local gradients are cleared (set to None) before each backward, so nothing accumulates
    across updates. The classic ``ensure_shared_grads`` skipped the hand-over once a shared
    grad existed, which on torch >= 2.0 fed the optimiser running sums of gradients.

    A non-finite loss or gradient is never handed over: the shared weights and optimiser
    state stay untouched. Returns the gradient norm before clipping (NaN or inf when the
    update was skipped). `lock` is held around the hand-over and step only.
    """
    local_model.zero_grad(set_to_none=True)
    if not torch.isfinite(loss):
        return float("nan")
    loss.backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(local_model.parameters(), max_grad_norm))
    if not math.isfinite(grad_norm):
        return grad_norm
    with lock:
        for shared, local in zip(shared_model.parameters(), local_model.parameters(), strict=True):
            shared.grad = local.grad
        optimizer.step()
    return grad_norm


# Updates averaged into one LossStats record: few messages, still a fine-grained curve.
LOSS_REPORT_UPDATES = 20
# Weight of the penalty on a Gaussian mean past the action bounds (`policy.beyond_bounds`).
BOUND_COEF = 1.0


class LossTerms(NamedTuple):
    total: torch.Tensor  # what is backpropagated
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor


class _LossAverages:
    """Running sums of one worker's loss terms between two reports."""

    def __init__(self) -> None:
        self.updates = 0
        self.sums = dict.fromkeys(("policy", "value", "entropy", "grad_norm"), 0.0)
        self.learning_rate = 0.0

    def add(self, terms: LossTerms, grad_norm: float, learning_rate: float) -> None:
        self.updates += 1
        self.sums["policy"] += float(terms.policy)
        self.sums["value"] += float(terms.value)
        self.sums["entropy"] += float(terms.entropy)
        self.sums["grad_norm"] += grad_norm
        self.learning_rate = learning_rate

    def report(self, rank: int, step: int, sigmas: dict[str, float]) -> LossStats:
        n = self.updates
        return LossStats(
            worker=rank,
            step=step,
            updates=n,
            policy_loss=self.sums["policy"] / n,
            value_loss=self.sums["value"] / n,
            entropy=self.sums["entropy"] / n,
            grad_norm=self.sums["grad_norm"] / n,
            learning_rate=self.learning_rate,
            sigma_encoder=sigmas.get("encoder"),
            sigma_core=sigmas.get("core"),
            sigma_policy=sigmas.get("policy"),
            sigma_value=sigmas.get("value"),
        )


class TrainingDiverged(Exception):
    """Too many updates in a row had a non-finite loss or gradient."""


@dataclass
class Rollout:
    """t_max steps of a worker's K environments, indexed [T, K], as the loss needs them.

    A rollout runs on across episode ends: an environment that finishes is reset at once,
    and its row of the recurrent state restarts from zero.
    """

    features: torch.Tensor  # [T, K, F] the encoder's outputs, with the rollout's autograd graph
    states: State  # [T, K, H] the core state fed to each step (None without an LSTM)
    carried: torch.Tensor  # [T, K] a step's state was the step before's (no new game began)
    actions: np.ndarray  # [T, K, *action_shape] as sampled: unclipped for continuous actions
    rewards: np.ndarray  # [T, K] the rewards learned from: clipped when the config says so
    terminal: np.ndarray  # [T, K] nothing to bootstrap after this step (or a life was lost)
    episode_end: np.ndarray  # [T, K] no return flows back across this step
    final_values: np.ndarray  # [T, K] V(final observation) at a truncation, else 0
    bootstrap_values: np.ndarray  # [K] V(observation after the last step)
    episodes: list[EpisodeRecord]  # episodes that ended, with their real scores
    observations: np.ndarray | None  # [T, K, ...] as the envs gave them, for obs_norm
    discounted_returns: np.ndarray | None  # [T, K] for return_norm

    def __len__(self) -> int:
        """Agent steps: T x K, whatever the shape of one action."""
        return int(self.rewards.size)


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
            config.env, count, config.frame_size, config.workers, f"a3c-worker-{rank}"
        )
        self.nonfinite_in_a_row = 0
        self.stats = _LossAverages()
        self.info = self.envs.info
        self.model = build_model(config, self.info)
        # NoisyNet: this worker's own noise (its seed differs from every other worker's).
        self.model.sample_noise()
        # Environment seeds never collide across workers: rank r owns r*K .. r*K+K-1.
        self.obs, self.lives = self.envs.reset(
            [config.seed + rank * count + index for index in range(count)]
        )
        self.state = self.model.initial_state(count)
        self.returns = (
            DiscountedReturns(count, config.gamma) if self.model.return_norm is not None else None
        )

    def close(self) -> None:
        self.envs.close()

    def collect_rollout(self) -> Rollout:
        """Play t_max steps in each environment with the local weights, recorded by autograd.

        With `life_loss_terminal`, a lost life counts as terminal for learning while the
        game itself, and its logged score, runs on to game over.
        """
        config = self.config
        steps, count = config.t_max, len(self.obs)
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
        returns: list[np.ndarray] | None = [] if self.returns is not None else None
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
            rewards[t] = (
                np.clip(result.rewards, -1.0, 1.0) if config.clip_rewards else result.rewards
            )
            ended = result.terminated | result.truncated
            # A lost life counts only while the game goes on: where an episode ended, the
            # lives are the next game's.
            life_lost = config.life_loss_terminal & ~ended & (result.lives < self.lives)
            self.lives = result.lives
            # A truncation is not a terminal: the final observation still has a value.
            terminal[t] = result.terminated | life_lost
            episode_end[t] = ended | life_lost
            for index, final_obs in result.final_observations.items():
                final_values[t, index] = self._value(final_obs, state, index)
            episodes.extend(
                EpisodeRecord(self.rank, 0, score, length) for _, score, length in result.episodes
            )
            for restarted in np.flatnonzero(ended).tolist():
                state = _restart(state, restarted)
                if t + 1 < steps:
                    carried[t + 1, restarted] = False
            self.obs = result.observations
            if self.returns is not None and returns is not None:
                returns.append(self.returns.step(rewards[t], episode_end[t]))
        if self.model.return_norm is not None:
            # The scale of the rollout's start, for every step of it: the local statistics
            # change only when the next rollout loads the shared ones.
            rewards /= float(self.model.return_norm.std)
            np.clip(rewards, -REWARD_CLIP, REWARD_CLIP, out=rewards)
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
            discounted_returns=None if returns is None else np.stack(returns),
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
                self.stats = _LossAverages()
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


def a3c_loss(scores: Scores, rollout: Rollout, config: TrainConfig) -> LossTerms:
    """Policy gradient, value regression and entropy bonus of a rollout's scored steps."""
    values = scores.value
    rewards = torch.from_numpy(rollout.rewards)
    terminal = torch.from_numpy(rollout.terminal)
    episode_end = torch.from_numpy(rollout.episode_end)
    following = torch.cat(
        [values[1:].detach(), torch.from_numpy(rollout.bootstrap_values).unsqueeze(0)]
    )
    truncated = episode_end & ~terminal
    next_values = torch.where(truncated, torch.from_numpy(rollout.final_values), following)
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
    policy_loss = -(advantages * scores.log_prob).mean()
    value_loss = F.mse_loss(values, returns)
    entropy = scores.entropy.mean()
    total = (
        policy_loss
        + config.vf_coef * value_loss
        - config.entropy_bonus * entropy
        + BOUND_COEF * scores.beyond_bounds.mean()
    )
    return LossTerms(total, policy_loss.detach(), value_loss.detach(), entropy.detach())


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
