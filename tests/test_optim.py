"""SharedAdam and SharedRMSprop: torch's own update rule, with state shared across processes."""

from __future__ import annotations

import copy
import multiprocessing as mp

import pytest
import torch

from a3c.optim import SharedAdam, SharedRMSprop, make_shared_optimizer


def small_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def step_with_loss(model: torch.nn.Module, optimizer: torch.optim.Optimizer, i: int) -> None:
    inputs = torch.randn(5, 4, generator=torch.Generator().manual_seed(i))
    optimizer.zero_grad()
    model(inputs).pow(2).sum().backward()
    optimizer.step()


@pytest.mark.parametrize(
    ("shared_type", "torch_type", "kwargs"),
    [
        (SharedAdam, torch.optim.Adam, {"lr": 1e-2}),
        (SharedAdam, torch.optim.Adam, {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.1}),
        (SharedRMSprop, torch.optim.RMSprop, {"lr": 1e-2, "alpha": 0.99, "eps": 0.1}),
        (SharedRMSprop, torch.optim.RMSprop, {"lr": 1e-2, "momentum": 0.9, "centered": True}),
    ],
)
def test_matches_torch_optimizer_over_20_steps(shared_type, torch_type, kwargs) -> None:
    reference = small_model()
    shared = copy.deepcopy(reference)
    reference_optimizer = torch_type(reference.parameters(), **kwargs)
    shared_optimizer = shared_type(shared.parameters(), **kwargs)
    for i in range(20):
        step_with_loss(reference, reference_optimizer, i)
        step_with_loss(shared, shared_optimizer, i)
        for ours, theirs in zip(shared.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_state_exists_before_the_first_step_and_is_shared() -> None:
    model = small_model()
    optimizer = make_shared_optimizer(
        "adam", model.parameters(), lr=1e-3, eps=1e-8, rmsprop_alpha=0.99
    )
    for param in model.parameters():
        state = optimizer.state[param]
        assert set(state) == {"step", "exp_avg", "exp_avg_sq"}
        assert all(tensor.is_shared() for tensor in state.values())


def step_fifty_times(model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank: int) -> None:
    torch.set_num_threads(1)
    for i in range(50):
        step_with_loss(model, optimizer, 1000 * rank + i)


def test_two_processes_share_step_count_and_weights() -> None:
    model = small_model()
    model.share_memory()
    optimizer = SharedAdam(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    context = mp.get_context("spawn")
    processes = [
        context.Process(target=step_fifty_times, args=(model, optimizer, rank)) for rank in range(2)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    for param, initial in zip(model.parameters(), before, strict=True):
        # Lock-free: two increments at the same instant can land as one, so the count is
        # at most 100, and above 50 only if both processes stepped the same shared counter.
        assert 50 < optimizer.state[param]["step"].item() <= 100
        assert not torch.equal(param, initial)


def test_share_memory_again_after_loading_a_state_dict() -> None:
    model = small_model()
    optimizer = SharedAdam(model.parameters(), lr=1e-3)
    step_with_loss(model, optimizer, 0)
    saved = copy.deepcopy(optimizer.state_dict())
    optimizer.load_state_dict(saved)
    optimizer.share_memory()
    for state in optimizer.state.values():
        assert state["step"].item() == 1
        assert all(tensor.is_shared() for tensor in state.values())
