"""n-step returns and GAE against numbers worked by hand, and the lambda identities."""

import pytest
import torch

from a3c.returns import gae, n_step_returns


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


NONE = t(0, 0, 0)


def test_n_step_bootstraps_from_the_last_next_value() -> None:
    # R2 = 3 + .5*4 = 5, R1 = 2 + .5*5 = 4.5, R0 = 1 + .5*4.5 = 3.25
    returns = n_step_returns(t(1, 2, 3), t(10, 20, 4), NONE, NONE, gamma=0.5)
    assert returns.tolist() == [3.25, 4.5, 5.0]


def test_n_step_terminal_inside_the_rollout_cuts_and_zeroes() -> None:
    # The episode terminates after step 1; steps 2-3 belong to the next episode.
    # R3 = 4 + .5*8 = 8, R2 = 3 + .5*8 = 7, R1 = 2 (terminal), R0 = 1 + .5*2 = 2
    ends = t(0, 1, 0, 0)
    returns = n_step_returns(t(1, 2, 3, 4), t(99, 99, 99, 8), ends, ends, gamma=0.5)
    assert returns.tolist() == [2.0, 2.0, 7.0, 8.0]


def test_n_step_truncation_inside_the_rollout_bootstraps_from_the_final_observation() -> None:
    # Truncated after step 1 with V(final observation) = 6: R1 = 2 + .5*6 = 5, R0 = 3.5
    returns = n_step_returns(t(1, 2, 3, 4), t(99, 6, 99, 8), t(0, 0, 0, 0), t(0, 1, 0, 0), 0.5)
    assert returns.tolist() == [3.5, 5.0, 7.0, 8.0]


def test_n_step_terminal_and_truncation_at_the_last_step() -> None:
    terminated = n_step_returns(t(1, 2), t(99, 8), t(0, 1), t(0, 1), gamma=0.5)
    assert terminated.tolist() == [2.0, 2.0]
    truncated = n_step_returns(t(1, 2), t(99, 8), t(0, 0), t(0, 1), gamma=0.5)
    assert truncated.tolist() == [4.0, 6.0]


VALUES = t(0.5, 1.0, 1.5)


def test_gae_with_bootstrap() -> None:
    # deltas: 1 + .5*1 - .5 = 1, 2 + .5*1.5 - 1 = 1.75, 3 + .5*4 - 1.5 = 3.5; gamma*lambda = .25
    # A2 = 3.5, A1 = 1.75 + .25*3.5 = 2.625, A0 = 1 + .25*2.625 = 1.65625
    advantages = gae(t(1, 2, 3), VALUES, t(1.0, 1.5, 4.0), NONE, NONE, 0.5, 0.5)
    assert advantages.tolist() == [1.65625, 2.625, 3.5]


def test_gae_terminal_inside_the_rollout() -> None:
    # delta1 = 2 - 1 = 1 (no bootstrap), A1 = 1 (cut), A0 = 1 + .25*1 = 1.25
    ends = t(0, 1, 0)
    advantages = gae(t(1, 2, 3), VALUES, t(1.0, 99, 4.0), ends, ends, 0.5, 0.5)
    assert advantages.tolist() == [1.25, 1.0, 3.5]


def test_gae_truncation_inside_the_rollout() -> None:
    # V(final observation) = 6: delta1 = 2 + .5*6 - 1 = 4, A1 = 4 (cut), A0 = 1 + .25*4 = 2
    advantages = gae(t(1, 2, 3), VALUES, t(1.0, 6.0, 4.0), NONE, t(0, 1, 0), 0.5, 0.5)
    assert advantages.tolist() == [2.0, 4.0, 3.5]


@pytest.fixture
def random_rollout() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    steps, batch = 32, 3
    terminated = torch.rand(steps, batch, generator=generator) < 0.1
    truncated = (torch.rand(steps, batch, generator=generator) < 0.1) & ~terminated
    episode_end = terminated | truncated
    values = torch.randn(steps, batch, generator=generator, dtype=torch.float64)
    # Within an episode V(s_{t+1}) is the next step's V(s_t); at an episode end and at the
    # rollout's last step it is the value of a final observation seen by no later step.
    final_values = torch.randn(steps, batch, generator=generator, dtype=torch.float64)
    following = torch.cat([values[1:], final_values[-1:]])
    next_values = torch.where(episode_end, final_values, following)
    return {
        "rewards": torch.randn(steps, batch, generator=generator, dtype=torch.float64),
        "values": values,
        "next_values": next_values,
        "terminated": terminated,
        "episode_end": episode_end,
    }


def test_gae_with_lambda_one_is_the_n_step_advantage(random_rollout) -> None:
    r = random_rollout
    advantages = gae(
        r["rewards"], r["values"], r["next_values"], r["terminated"], r["episode_end"], 0.9, 1.0
    )
    returns = n_step_returns(r["rewards"], r["next_values"], r["terminated"], r["episode_end"], 0.9)
    torch.testing.assert_close(advantages, returns - r["values"])


def test_gae_with_lambda_zero_is_the_one_step_td_error(random_rollout) -> None:
    r = random_rollout
    advantages = gae(
        r["rewards"], r["values"], r["next_values"], r["terminated"], r["episode_end"], 0.9, 0.0
    )
    not_terminated = (~r["terminated"]).double()
    td_error = r["rewards"] + 0.9 * r["next_values"] * not_terminated - r["values"]
    torch.testing.assert_close(advantages, td_error)
