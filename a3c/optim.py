"""Optimisers whose state lives in shared memory, so every worker steps the same statistics.

Each keeps torch's own update rule (``step()`` is inherited untouched); all that changes is
that the state, the step count included, is created up front and moved to shared memory
before any worker starts. Workers then step it without a lock, Hogwild style: a step count
incremented by two workers at the same instant can lose one increment, which only nudges
Adam's bias correction during the first few hundred updates.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def _scalar_step() -> torch.Tensor:
    # Same dtype and device torch gives the step count when it creates it lazily.
    return torch.zeros((), dtype=torch.get_default_dtype())


class _SharedState:
    def share_memory(self) -> None:
        """Move the state to shared memory; call again after `load_state_dict`."""
        assert isinstance(self, torch.optim.Optimizer)
        for state in self.state.values():
            for value in state.values():
                if torch.is_tensor(value):
                    value.share_memory_()


class SharedAdam(_SharedState, torch.optim.Adam):
    """`torch.optim.Adam` with eagerly created, shared state."""

    def __init__(self, params: Iterable[torch.nn.Parameter], **kwargs: object) -> None:
        super().__init__(params, **kwargs)  # type: ignore[arg-type]
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state[param]
                state["step"] = _scalar_step()
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = torch.zeros_like(
                        param, memory_format=torch.preserve_format
                    )
        self.share_memory()


class SharedRMSprop(_SharedState, torch.optim.RMSprop):
    """`torch.optim.RMSprop` with eagerly created, shared statistics (the A3C paper's choice)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], **kwargs: object) -> None:
        super().__init__(params, **kwargs)  # type: ignore[arg-type]
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state[param]
                state["step"] = _scalar_step()
                state["square_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                if group["momentum"] > 0:
                    state["momentum_buffer"] = torch.zeros_like(
                        param, memory_format=torch.preserve_format
                    )
                if group["centered"]:
                    state["grad_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        self.share_memory()


def make_shared_optimizer(
    name: str, params: Iterable[torch.nn.Parameter], lr: float, eps: float, rmsprop_alpha: float
) -> SharedAdam | SharedRMSprop:
    """The shared optimiser a config names."""
    if name == "adam":
        return SharedAdam(params, lr=lr, eps=eps, foreach=True)
    if name == "rmsprop":
        return SharedRMSprop(params, lr=lr, eps=eps, alpha=rmsprop_alpha, foreach=True)
    raise ValueError(f"unknown optimizer {name!r}")
