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
    first, _ = model.act(obs, None, generator=torch.Generator().manual_seed(1))
    again, _ = model.act(obs, None, generator=torch.Generator().manual_seed(1))
    assert torch.equal(first, again)
    probs = torch.softmax(model(obs[:1], None)[0], -1)[0]
    frequencies = torch.bincount(first, minlength=3).double() / len(first)
    # 20k samples: the standard error of each frequency is below 0.004
    torch.testing.assert_close(frequencies, probs.double(), atol=0.02, rtol=0)


def test_step_scores_its_sampled_actions_as_categorical_does(model: ActorCritic) -> None:
    obs = torch.randn(6, 4)
    torch.manual_seed(5)
    step = model.step(obs, model.initial_state(6))
    torch.manual_seed(5)
    sampled, _ = model.act(obs, model.initial_state(6))
    assert torch.equal(step.action, sampled)
    logits, value, _ = model(obs, model.initial_state(6))
    distribution = Categorical(logits=logits)
    torch.testing.assert_close(step.log_prob, distribution.log_prob(step.action))
    torch.testing.assert_close(step.entropy, distribution.entropy())
    torch.testing.assert_close(step.value, value)
    assert step.log_prob.requires_grad and step.value.requires_grad
    assert not step.action.requires_grad
