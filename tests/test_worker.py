"""The worker: gradient hand-off, the per-rollout step counter, the update it makes."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np
import torch
from helpers import ActionRecorder, make_shared
from torch.distributions import Categorical

from a3c.config import TrainConfig
from a3c.envs import describe_env
from a3c.loss import a3c_loss, apply_gradients
from a3c.metrics import EpisodeRecord, LossStats
from a3c.model import Scores
from a3c.normalize import REWARD_CLIP
from a3c.optim import SharedAdam
from a3c.sharing import LocalInbox, SharedObjects
from a3c.worker import Worker


def test_shared_optimizer_sees_exactly_each_updates_gradient() -> None:
    """Update i uses loss i * sum(w): its true gradient is i for every weight.

    The classic early-return hand-off fed the optimiser 1, 3, 6, 10 ... instead.
    """
    torch.manual_seed(0)
    local = torch.nn.Linear(3, 2)
    shared = torch.nn.Linear(3, 2)
    shared.load_state_dict(local.state_dict())
    shared.share_memory()
    optimizer = SharedAdam(shared.parameters(), lr=1e-3)
    seen: list[list[torch.Tensor]] = []
    optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: seen.append([p.grad.clone() for p in shared.parameters()])
    )
    for i in range(1, 6):
        local.load_state_dict(shared.state_dict())
        loss = i * sum(p.sum() for p in local.parameters())
        apply_gradients(local, shared, optimizer, loss, max_grad_norm=1e9)
    assert len(seen) == 5
    for i, grads in enumerate(seen, start=1):
        for grad in grads:
            assert torch.equal(grad, torch.full_like(grad, float(i)))


def test_gradient_is_clipped_to_max_norm() -> None:
    local, shared = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(shared.parameters(), lr=0.0)
    loss = 100 * sum(p.sum() for p in local.parameters())
    norm = apply_gradients(local, shared, optimizer, loss, max_grad_norm=1.0)
    assert norm > 1.0
    clipped = torch.cat([p.grad.flatten() for p in shared.parameters()]).norm()
    assert abs(clipped.item() - 1.0) < 1e-5


def test_counter_grows_once_per_rollout_by_t_max_times_envs() -> None:
    config = TrainConfig(env="CartPole-v1", workers=0, t_max=7, envs_per_worker=3)
    shared = make_shared(config)
    worker = Worker(0, config, shared)
    before = [p.detach().clone() for p in shared.model.parameters()]
    totals = [worker.train_once() for _ in range(30)]
    worker.close()
    assert totals == [21 * (i + 1) for i in range(30)]
    messages = shared.messages.receive()
    episodes = [m for m in messages if isinstance(m, EpisodeRecord)]
    (losses,) = [m for m in messages if isinstance(m, LossStats)]  # one per 20 updates
    assert losses.updates == 20 and losses.step == totals[19]
    assert episodes
    assert shared.episodes_done == len(episodes)
    assert {e.step for e in episodes} <= set(totals)
    assert sum(e.length for e in episodes) <= shared.steps_done
    after = shared.model.parameters()
    assert any(not torch.equal(p, b) for p, b in zip(after, before, strict=True))


def test_rollout_marks_episode_boundaries() -> None:
    config = TrainConfig(env="CartPole-v1", workers=0, t_max=50, envs_per_worker=2, lstm=True)
    worker = Worker(0, config, make_shared(config))
    rollout = worker.collect_rollout()
    worker.close()
    assert rollout.actions.shape == rollout.rewards.shape == (50, 2)
    assert rollout.features.shape[:2] == (50, 2) and rollout.features.requires_grad
    assert rollout.states is not None and rollout.states[0].shape == (50, 2, config.hidden_size)
    # An untrained CartPole policy falls within 50 steps: each fall is a terminal.
    ends = np.argwhere(rollout.episode_end)
    assert len(ends) == len(rollout.episodes) > 0
    assert (rollout.terminal == rollout.episode_end).all()
    # The step after each end starts a new game from a zeroed state.
    starts = ~rollout.carried.numpy()
    assert (starts[1:] == rollout.episode_end[:-1]).all() and not starts[0].any()
    for t, k in np.argwhere(starts):
        assert not rollout.states[0][t, k].any() and not rollout.states[1][t, k].any()


def test_recorded_rollout_gives_the_step_by_step_loss_and_gradients() -> None:
    """The worker's loss equals a plain replay: Categorical scores, state zeroed per episode.

    The replay is autograd through `nn.LSTMCell` step by step, so it also checks the LSTM's
    hand-written backward pass over the rollout.
    """
    torch.manual_seed(0)
    config = TrainConfig(env="CartPole-v1", workers=0, t_max=30, envs_per_worker=2, lstm=True)
    worker = Worker(0, config, make_shared(config))
    worker.envs.envs = [
        ActionRecorder(env, worker.obs[i]) for i, env in enumerate(worker.envs.envs)
    ]
    worker.collect_rollout()  # the second rollout starts from a carried-over LSTM state
    rollout = worker.collect_rollout()
    worker.close()
    model = worker.model
    model.zero_grad()
    worker.loss(rollout).total.backward()
    ours = [p.grad.clone() for p in model.parameters()]

    recorders = worker.envs.envs
    state = model.initial_state(2)
    log_probs, entropies, values, ended = [], [], [], torch.zeros(2, dtype=torch.bool)
    for t in range(2 * config.t_max):
        if t == config.t_max:
            state = (state[0].detach(), state[1].detach())
        keep = (~ended).float().unsqueeze(1)
        state = (state[0] * keep, state[1] * keep)
        obs = torch.from_numpy(np.stack([r.steps[t][0] for r in recorders]))
        actions = torch.from_numpy(np.stack([r.steps[t][1] for r in recorders]))
        ended = torch.tensor([r.steps[t][2] for r in recorders])
        logits, value, state = model(obs, state)
        if t >= config.t_max:
            assert torch.equal(actions, torch.from_numpy(rollout.actions[t - config.t_max]))
            distribution = Categorical(logits=logits)
            log_probs.append(distribution.log_prob(actions))
            entropies.append(distribution.entropy())
            values.append(value)
    assert len(rollout.episodes) > 0, "no episode boundary inside the rollout"
    replayed = Scores(
        torch.stack(log_probs), torch.stack(entropies), torch.stack(values), torch.zeros(())
    )
    model.zero_grad()
    reference = a3c_loss(replayed, rollout, config).total
    reference.backward()
    torch.testing.assert_close(worker.loss(rollout).total, reference, atol=1e-5, rtol=0)
    for mine, theirs in zip(ours, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)


def test_learning_rate_decays_linearly_with_the_global_step() -> None:
    config = TrainConfig(lr=1e-3, lr_decay=True, total_steps=1000)
    assert config.learning_rate_at(0) == 1e-3
    assert abs(config.learning_rate_at(250) - 7.5e-4) < 1e-12
    assert config.learning_rate_at(1000) == 0.0
    assert config.learning_rate_at(2000) == 0.0
    assert TrainConfig(lr=1e-3).learning_rate_at(999) == 1e-3


def test_scaled_rewards_are_clipped_before_any_return_has_spread() -> None:
    """Until a sparse environment pays, every return is 0 and the scale is sqrt(1e-8):
    CartPole's reward of 1 would reach the learner as 10,000."""
    config = TrainConfig(env="CartPole-v1", workers=0, t_max=5, envs_per_worker=2)
    worker = Worker(0, config, make_shared(config))
    statistics = worker.model.return_norm
    assert statistics is not None
    statistics.update(np.zeros(100))
    rollout = worker.collect_rollout()
    worker.close()
    assert (rollout.rewards == REWARD_CLIP).all()


def _take_and_die(lock) -> None:
    lock.acquire()
    os._exit(0)


def test_a_pause_of_the_updates_passes_over_the_lock_of_a_dead_worker() -> None:
    """Several machines: a worker died holding its update lock; a meeting's pause must
    not wait for it, and still holds every live worker's lock."""
    context = mp.get_context("forkserver")
    model = torch.nn.Linear(2, 2)
    shared = SharedObjects.create(
        model, torch.optim.SGD(model.parameters(), lr=0.1), describe_env("CartPole-v1"),
        LocalInbox(), workers=2,
        context=context, update_locks=True,
    )  # fmt: skip
    dying = context.Process(target=_take_and_die, args=(shared.update_locks[0],))
    dying.start()
    dying.join()
    started = time.monotonic()
    with shared.updates_paused(lambda index: index != 0):
        assert time.monotonic() - started < 5
        assert not shared.update_locks[1].acquire(timeout=0.1)
    assert shared.update_locks[1].acquire(timeout=0.1)
