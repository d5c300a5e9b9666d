"""Fault injection for the reliability tests, off unless A3C_FAULT is set.

``A3C_FAULT=KIND:PROCESS:STEP[:ONCE_FILE]`` makes the environment of the process named
PROCESS (``a3c-worker-1``, ``a3c-evaluator``) misbehave at its STEP-th step:

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


class FaultInjector(gym.Wrapper):
    def __init__(self, env: gym.Env, kind: str, step: int, once_file: Path | None) -> None:
        super().__init__(env)
        self.kind, self.at_step, self.once_file = kind, step, once_file
        self.steps = 0

    def _fires(self) -> bool:
        if self.steps < self.at_step:
            return False
        if self.once_file is None:
            return True
        try:
            self.once_file.open("x").close()  # atomic: only one process creates it
        except FileExistsError:
            return False
        return True

    def step(self, action: Any) -> Any:
        self.steps += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._fires():
            if self.kind == "raise":
                raise InjectedFault(f"injected fault at step {self.steps}")
            reward = float("nan")
        return obs, reward, terminated, truncated, info


def _fault_for(process_name: str) -> list[str] | None:
    """A3C_FAULT's fields when it names this process."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return None
    fields = spec.split(":", 3)
    return fields if len(fields) > 1 and fields[1] == process_name else None


def injects(process_name: str) -> bool:
    """Whether A3C_FAULT asks for a fault in the process named `process_name`."""
    return _fault_for(process_name) is not None


def maybe_inject(env: gym.Env, process_name: str) -> gym.Env:
    """`env`, wrapped with the fault A3C_FAULT asks for in this process, if any."""
    fields = _fault_for(process_name)
    if fields is None:
        return env
    kind, _, step, *once = fields
    if kind not in ("raise", "nan"):
        raise ValueError(f"{ENV_VAR}: unknown fault kind {kind!r}")
    return FaultInjector(env, kind, int(step), Path(once[0]) if once else None)
