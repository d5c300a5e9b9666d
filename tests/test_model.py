"""ActorCritic: shapes, action choice, and the batched re-scoring the worker relies on."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical

from a3c.model import ActorCritic


@pytest.fixture(params=[True, False], ids=["lstm", "feedforward"])
def model(request) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic((4,), 3, hidden_size=16, lstm=request.param)


def test_forward_shapes(model: ActorCritic) -> None:
    logits, value, state = model(torch.randn(5, 4), model.initial_state(5))
    assert logits.shape == (5, 3)
    assert value.shape == (5,)
    if model.lstm is None:
        assert state is None
    else:
        assert state is not None and state[0].shape == (5, 16)


def test_greedy_takes_the_most_probable_action(model: ActorCritic) -> None:
    obs = torch.randn(7, 4)
    logits, _, _ = model(obs, model.initial_state(7))
    action, _ = model.act(obs, model.initial_state(7), greedy=True)
    assert torch.equal(action, logits.argmax(-1))


def test_sampling_follows_the_policy_and_is_reproducible() -> None:
    torch.manual_seed(0)
    model = ActorCritic((4,), 3, hidden_size=16, lstm=False)
    with torch.no_grad():
        model.policy.weight.normal_(0, 1.0)
    obs = torch.randn(1, 4).expand(20_000, 4)
    first, _ = model.act(obs, None, generator=torch.Generator().manual_seed(1))
    again, _ = model.act(obs, None, generator=torch.Generator().manual_seed(1))
    assert torch.equal(first, again)
    probs = torch.softmax(model(obs[:1], None)[0], -1)[0]
    frequencies = torch.bincount(first, minlength=3).double() / len(first)
    # 20k samples: the standard error of each frequency is below 0.004
    torch.testing.assert_close(frequencies, probs.double(), atol=0.02, rtol=0)


def step_by_step(model: ActorCritic, obs, actions, state, episode_start):
    log_probs, entropies, values = [], [], []
    for t in range(actions.shape[0]):
        if state is not None:
            keep = (~episode_start[t]).float().unsqueeze(1)
            state = (state[0] * keep, state[1] * keep)
        logits, value, state = model(obs[t], state)
        distribution = Categorical(logits=logits)
        log_probs.append(distribution.log_prob(actions[t]))
        entropies.append(distribution.entropy())
        values.append(value)
    return torch.stack(log_probs), torch.stack(entropies), torch.stack(values)


def test_batched_rescoring_equals_step_by_step_loss_and_gradients(model: ActorCritic) -> None:
    generator = torch.Generator().manual_seed(3)
    steps, batch = 12, 2
    obs = torch.randn(steps, batch, 4, generator=generator)
    actions = torch.randint(0, 3, (steps, batch), generator=generator)
    start = model.initial_state(batch)
    if start is not None:
        start = (torch.randn(batch, 16, generator=generator), torch.randn(batch, 16))
    advantages = torch.randn(steps, batch, generator=generator)
    episode_start = torch.zeros(steps, batch, dtype=torch.bool)
    episode_start[4, 0] = episode_start[9, 1] = True

    def loss_of(log_probs, entropies, values):
        return -(advantages * log_probs).mean() + values.pow(2).mean() - 0.01 * entropies.mean()

    model.zero_grad()
    reference = loss_of(*step_by_step(model, obs, actions, start, episode_start))
    reference.backward()
    reference_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    scored = model.evaluate_actions(obs, actions, start, episode_start)
    batched = loss_of(scored.log_probs, scored.entropies, scored.values)
    batched.backward()

    torch.testing.assert_close(batched, reference, atol=1e-5, rtol=0)
    for ours, theirs in zip((p.grad for p in model.parameters()), reference_grads, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
