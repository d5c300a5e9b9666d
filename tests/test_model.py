"""ActorCritic: shapes, action choice, and the scored step the worker records."""

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
    torch.manual_seed(1)
    first, _ = model.act(obs, None)
    torch.manual_seed(1)
    again, _ = model.act(obs, None)
    assert torch.equal(first, again)
    probs = torch.softmax(model(obs[:1], None)[0], -1)[0]
    frequencies = torch.bincount(first, minlength=3).double() / len(first)
    # 20k samples: the standard error of each frequency is below 0.004
    torch.testing.assert_close(frequencies, probs.double(), atol=0.02, rtol=0)


def test_a_row_with_its_own_generator_samples_the_same_in_any_batch() -> None:
    torch.manual_seed(0)
    model = ActorCritic((4,), 6, hidden_size=16, lstm=False)
    obs = torch.randn(1, 4).expand(200, 4)
    generators = [torch.Generator().manual_seed(seed) for seed in range(200)]
    batch, _ = model.act(obs, None, generators=generators)
    alone = [
        model.act(obs[:1], None, generators=[torch.Generator().manual_seed(seed)])[0].item()
        for seed in range(200)
    ]
    assert batch.tolist() == alone
    assert len(set(alone)) > 1  # the seeds, not the batch, decide


def test_step_samples_as_act_does_and_records_the_encoder(model: ActorCritic) -> None:
    obs = torch.randn(6, 4)
    torch.manual_seed(5)
    step = model.step(obs, model.initial_state(6))
    torch.manual_seed(5)
    sampled, state = model.act(obs, model.initial_state(6))
    assert torch.equal(step.action, sampled)
    assert step.features.requires_grad and not step.action.requires_grad
    if state is not None:
        assert step.state is not None and torch.equal(step.state[0], state[0])
        assert not step.state[0].requires_grad


def test_score_equals_a_step_by_step_pass_and_its_gradients(model: ActorCritic) -> None:
    """`score` over a rollout, against autograd through the model one step at a time."""
    steps, batch = 7, 3
    torch.manual_seed(1)
    obs = torch.randn(steps, batch, 4)
    actions = torch.randint(0, 3, (steps, batch))
    carried = torch.ones(steps, batch, dtype=torch.bool)
    carried[2, 0] = carried[5, 0] = carried[4, 2] = False  # new episodes: states zeroed
    weights = torch.randn(3, steps, batch)  # an arbitrary loss, so every output matters
    state = None if model.lstm is None else (torch.randn(batch, 16), torch.randn(batch, 16))

    fed, reference = [], []
    for t in range(steps):
        if state is not None:
            keep = carried[t].float().unsqueeze(1)
            state = (state[0] * keep, state[1] * keep)
            fed.append((state[0].detach(), state[1].detach()))
        logits, value, state = model(obs[t], state)
        distribution = Categorical(logits=logits)
        reference.append((distribution.log_prob(actions[t]), distribution.entropy(), value))
    expected = [torch.stack(parts) for parts in zip(*reference, strict=True)]
    model.zero_grad()
    sum((w * part).sum() for w, part in zip(weights, expected, strict=True)).backward()
    expected_grads = [p.grad.clone() for p in model.parameters()]

    states = None if not fed else tuple(torch.stack(parts) for parts in zip(*fed, strict=True))
    scores = model.score(model.encoder(obs.view(steps * batch, 4)).view(steps, batch, -1),
                         states, carried, actions)  # fmt: skip
    model.zero_grad()
    scored = (scores.log_prob, scores.entropy, scores.value)  # discrete: nothing past bounds
    sum((w * part).sum() for w, part in zip(weights, scored, strict=True)).backward()
    for mine, theirs in zip(scored, expected, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
    for param, theirs in zip(model.parameters(), expected_grads, strict=True):
        torch.testing.assert_close(param.grad, theirs, atol=1e-5, rtol=0)
