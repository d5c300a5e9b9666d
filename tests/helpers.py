"""What several test modules share: running the real commands, reading what a run left,
and building a serial worker's shared objects."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from a3c.config import TrainConfig
from a3c.envs import describe_env
from a3c.loss import a3c_loss
from a3c.model import Scores, build_model
from a3c.optim import make_shared_optimizer
from a3c.plot import read_csv
from a3c.policy import beyond_bounds
from a3c.sharing import LocalInbox, SharedObjects
from a3c.worker import Worker

__all__ = ["read_csv"]

BIN = Path(sys.executable).parent


def leftover_processes(marker: str) -> list[int]:
    """PIDs of live processes whose environment carries `marker` (children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if f"A3C_TEST_MARKER={marker}".encode() in environ and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


def process_named(marker: str, name: str) -> int | None:
    """PID of the live process carrying `marker` whose /proc comm is `name`."""
    for pid in leftover_processes(marker):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                return pid
        except OSError:
            continue
    return None


class Cli:
    """Runs a3c-train / a3c-eval in a subprocess tagged with a unique marker."""

    def __init__(self) -> None:
        self.marker = uuid.uuid4().hex
        self.env = {**os.environ, "A3C_TEST_MARKER": self.marker, "PYTHONUNBUFFERED": "1"}

    def run(
        self, command: str, *args: str, timeout: float = 300, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / command), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=cwd,
        )

    def start(self, command: str, *args: str, own_group: bool = False) -> subprocess.Popen[str]:
        """Start a command without waiting; its output is captured. With `own_group`, it
        leads a new process group (and session) that holds every process it starts."""
        return subprocess.Popen(
            [str(BIN / command), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=own_group,
        )

    def leftovers(self) -> list[int]:
        return leftover_processes(self.marker)

    def wait_for_no_leftovers(self, seconds: float = 10.0) -> list[int]:
        deadline = time.monotonic() + seconds
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def wait_for_process(self, name: str, seconds: float = 60.0) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pid = process_named(self.marker, name)
            if pid is not None:
                return pid
            time.sleep(0.2)
        raise AssertionError(f"no process named {name} appeared within {seconds} s")


def only_run(parent: Path) -> Path:
    """The one run folder a command created under `parent`."""
    (run,) = list(parent.iterdir())
    return run


def hide_packages(folder: Path, *names: str) -> str:
    """A PYTHONPATH whose site hook makes `names` look uninstalled to a command."""
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {names!r}:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
    )
    return str(folder)


def process_group(pgid: int) -> list[str]:
    """`PID state` of every process in group `pgid`, zombies included: a child that has
    exited but that nobody has reaped yet still belongs to the group."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which may hold spaces: state, ppid, pgrp, ...
        state, _, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid:
            members.append(f"{entry.name} {state}")
    return members


def make_shared(config: TrainConfig, lr: float | None = None) -> SharedObjects:
    """Shared objects for a serial worker of `config` (optimiser at `lr` if given)."""
    model = build_model(config, describe_env(config.env))
    model.share_memory()
    return SharedObjects.create(
        model=model,
        profile=describe_env(config.env),
        optimizer=make_shared_optimizer(
            config.optimizer,
            model.parameters(),
            config.learning_rate if lr is None else lr,
            config.optimizer_eps,
            config.rmsprop_alpha,
        ),
        messages=LocalInbox(),
        workers=0,
    )


class ActionRecorder(gym.Wrapper):
    """Remembers each (observation acted on, action as the env got it, episode ended)."""

    def __init__(self, env: gym.Env, first_obs: np.ndarray) -> None:
        super().__init__(env)
        self.current = first_obs.copy()
        self.steps: list[tuple[np.ndarray, np.ndarray, bool]] = []

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps.append((self.current, np.array(action), bool(terminated or truncated)))
        self.current = obs.copy()
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.current = obs.copy()
        return obs, info


def assert_loss_is_the_replayed_loss(
    worker: Worker, rollout
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The worker's loss of its first rollout, and every gradient, equal a step-by-step
    replay of the ActionRecorder envs (state zeroed at episode ends); returns the
    gradients and the replayed loss."""
    model = worker.model
    model.zero_grad()
    worker.loss(rollout).total.backward()
    ours = {name: p.grad.clone() for name, p in model.named_parameters()}
    state = model.initial_state(len(worker.envs.envs))
    log_probs, entropies, values, beyond = [], [], [], []
    ended = torch.zeros(len(worker.envs.envs), dtype=torch.bool)
    for t in range(len(rollout.actions)):
        if state is not None:
            keep = (~ended).float().unsqueeze(1)
            state = (state[0] * keep, state[1] * keep)
        obs = torch.from_numpy(np.stack([r.steps[t][0] for r in worker.envs.envs]))
        ended = torch.tensor([r.steps[t][2] for r in worker.envs.envs])
        params, value, state = model(obs, state)
        distribution = model.actions.distribution(params)
        taken = torch.from_numpy(rollout.actions[t])
        log_probs.append(distribution.log_prob(taken))
        entropies.append(distribution.entropy())
        values.append(value)
        beyond.append(beyond_bounds(distribution.mean) if taken.is_floating_point() else 0.0)
    replayed = Scores(
        torch.stack(log_probs),
        torch.stack(entropies),
        torch.stack(values),
        torch.stack([torch.as_tensor(b) for b in beyond]),
    )
    model.zero_grad()
    reference = a3c_loss(replayed, rollout, worker.config).total
    reference.backward()
    # A loss of tens is summed in float32: a few units in its last place may differ.
    torch.testing.assert_close(worker.loss(rollout).total, reference, atol=1e-5, rtol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, atol=1e-5, rtol=0, msg=name)
    return ours, reference
