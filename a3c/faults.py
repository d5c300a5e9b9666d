"""Fault injection for the reliability tests, off unless A3C_FAULT is set.

``A3C_FAULT=KIND:PROCESS:STEP[:ONCE_FILE]`` makes the environments of the process named
PROCESS (``a3c-worker-1``, ``a3c-evaluator``) misbehave at its STEP-th step: a worker's
step of its whole env batch (ale-py's vector env or gymnasium's, as in production), an
evaluator's step of one env.

- ``raise``: the step raises ``RuntimeError``;
- ``nan``: the step returns a NaN reward.

Without ONCE_FILE the fault repeats at every step from STEP on (``raise`` in every restart
of the process). With it, the fault fires once in the whole run: the first process to fire
creates the file, and none fires while it exists.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

ENV_VAR = "A3C_FAULT"


class InjectedFault(RuntimeError):
    """The failure a test asked for."""


class _Trigger:
    """Counts a process's steps and says when the fault fires."""

    def __init__(self, kind: str, step: int, once_file: Path | None) -> None:
        self.kind, self.at_step, self.once_file = kind, step, once_file
        self.steps = 0

    def step(self) -> bool:
        """Count one step; True when the fault fires at it (`raise` raises here)."""
        self.steps += 1
        if self.steps < self.at_step:
            return False
        if self.once_file is not None:
            try:
                self.once_file.open("x").close()  # atomic: only one process creates it
            except FileExistsError:
                return False
        if self.kind == "raise":
            raise InjectedFault(f"injected fault at step {self.steps}")
        return True


class FaultyEnv(gym.Wrapper):
    """An evaluation env whose steps misbehave as A3C_FAULT asks: a NaN reward, or a raise."""

    def __init__(self, env: gym.Env, trigger: _Trigger) -> None:
        super().__init__(env)
        self.trigger = trigger

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.trigger.step():
            reward = float("nan")
        return obs, reward, terminated, truncated, info


class FaultyBatch:
    """A worker's env batch, whichever production uses, misbehaving as A3C_FAULT asks:
    a step of the whole batch counts as one, and a NaN fault spoils every reward of it."""

    def __init__(self, batch: Any, trigger: _Trigger) -> None:
        self.batch, self.trigger = batch, trigger
        self.profile = batch.profile

    def reset(self, seeds: Any) -> Any:
        return self.batch.reset(seeds)

    def step(self, actions: Any) -> Any:
        result = self.batch.step(actions)
        if self.trigger.step():
            result.rewards = result.rewards * float("nan")
        return result

    def close(self) -> None:
        self.batch.close()


def _trigger_for(process_name: str) -> _Trigger | None:
    """The trigger A3C_FAULT asks for in the process named `process_name`, if any."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return None
    fields = spec.split(":", 3)
    if len(fields) < 3 or fields[1] != process_name:
        return None
    kind, _, step, *once = fields
    if kind not in ("raise", "nan"):
        raise ValueError(f"{ENV_VAR}: unknown fault kind {kind!r}")
    return _Trigger(kind, int(step), Path(once[0]) if once else None)


def maybe_inject(env: gym.Env, process_name: str) -> gym.Env:
    """`env`, misbehaving as A3C_FAULT asks in this process, if it does."""
    trigger = _trigger_for(process_name)
    return env if trigger is None else FaultyEnv(env, trigger)


def maybe_inject_into_batch(batch: Any, process_name: str) -> Any:
    """A worker's env batch, misbehaving as A3C_FAULT asks in this process, if it does."""
    trigger = _trigger_for(process_name)
    return batch if trigger is None else FaultyBatch(batch, trigger)
