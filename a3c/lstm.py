"""`nn.LSTMCell` over a whole recorded rollout: one batched forward pass, and a backward
pass where only the gradient through time goes step by step (docs/design.md)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class _LSTMOverRollout(torch.autograd.Function):
    """`nn.LSTMCell` over T recorded steps whose input states are already known.

    Forward: every step at once, two matrix products over all T x B rows. Backward: only
    the gradient that flows through time (through h @ W_hh) goes step by step; the weight
    and input gradients are one matrix product each over all rows. Gate order as in
    `nn.LSTMCell`: input, forget, cell, output.
    """

    @staticmethod
    def forward(
        ctx: Any,
        inputs: torch.Tensor,
        h_in: torch.Tensor,
        c_in: torch.Tensor,
        carried: torch.Tensor,
        weight_ih: torch.Tensor,
        weight_hh: torch.Tensor,
        bias_ih: torch.Tensor,
        bias_hh: torch.Tensor,
    ) -> torch.Tensor:
        steps, batch, _ = inputs.shape
        x = inputs.reshape(steps * batch, -1)
        h_prev = h_in.reshape(steps * batch, -1)
        gates = torch.addmm(bias_ih + bias_hh, x, weight_ih.t()).addmm_(h_prev, weight_hh.t())
        i, f, g, o = gates.view(steps, batch, -1).chunk(4, -1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        tanh_c = torch.tanh(f * c_in + i * g)
        ctx.save_for_backward(x, h_prev, c_in, carried, weight_ih, weight_hh, i, f, g, o, tanh_c)
        return o * tanh_c

    @staticmethod
    def backward(ctx: Any, grad_h: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, h_prev, c_in, carried, weight_ih, weight_hh, i, f, g, o, tanh_c = ctx.saved_tensors
        steps, batch, hidden = grad_h.shape
        # Derivatives of each gate's activation and of h with respect to c, all steps at once.
        di_pre, df_pre, dg_pre = i * (1 - i), f * (1 - f), 1 - g * g
        do_pre = o * (1 - o) * tanh_c
        dc_from_h = o * (1 - tanh_c * tanh_c)
        grad_gates = grad_h.new_empty(steps, batch, 4 * hidden)
        grad_i, grad_f, grad_g, grad_o = grad_gates.chunk(4, -1)
        carry = carried.to(grad_h.dtype).unsqueeze(-1)
        dh_later = grad_h.new_zeros(batch, hidden)
        dc_later = grad_h.new_zeros(batch, hidden)
        for t in range(steps - 1, -1, -1):
            dh = grad_h[t] + dh_later
            dc = dc_later + dh * dc_from_h[t]
            torch.mul(dh, do_pre[t], out=grad_o[t])
            torch.mul(dc * g[t], di_pre[t], out=grad_i[t])
            torch.mul(dc * c_in[t], df_pre[t], out=grad_f[t])
            torch.mul(dc * i[t], dg_pre[t], out=grad_g[t])
            if t > 0:
                dc_later = dc * f[t] * carry[t]
                dh_later = (grad_gates[t] @ weight_hh) * carry[t]
        rows = grad_gates.view(steps * batch, -1)
        grad_inputs = (rows @ weight_ih).view(steps, batch, -1) if ctx.needs_input_grad[0] else None
        grad_bias = rows.sum(0)
        # Two tensors: gradient clipping scales each parameter's gradient in place, so one
        # tensor shared by both biases could be counted and scaled twice.
        return (
            grad_inputs, None, None, None,
            rows.t() @ x, rows.t() @ h_prev, grad_bias, grad_bias.clone(),
        )  # fmt: skip


def lstm_over_rollout(
    cell: nn.LSTMCell, inputs: torch.Tensor, states: tuple[torch.Tensor, torch.Tensor],
    carried: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    """Outputs h [T, B, H] of `cell` for inputs [T, B, F], each step fed states[0/1][t]."""
    output: torch.Tensor = _LSTMOverRollout.apply(
        inputs, states[0], states[1], carried,
        cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh,
    )  # fmt: skip
    return output
