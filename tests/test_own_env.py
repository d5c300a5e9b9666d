"""A user's own environment: `module:Id`, env kwargs, wrappers, an episode cap, symbol grids."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from helpers import make_shared, only_run, read_csv

from a3c.config import TrainConfig
from a3c.envs import EnvRecipe, describe_env, make_env
from a3c.errors import UsageError
from a3c.profile import FRAMES, GRID
from a3c.worker import Worker

# A module a user would write: it registers its environment when imported, and its
# environment and wrapper write down, per process, what they were built with.
MODULE = '''
import json, os
import gymnasium as gym
import numpy as np

LOG = os.environ["MYENVS_LOG"]


def _note(**fields):
    with open(f"/proc/{os.getpid()}/comm") as comm:
        fields["process"] = comm.read().strip()
    with open(LOG, "a") as log:
        log.write(json.dumps(fields) + "\\n")


class Corridor(gym.Env):
    """Walk right from cell 0 to the last cell: reward 1 there, -0.01 for every step."""

    def __init__(self, length=5, render_mode=None):
        _note(made="Corridor", length=length)
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self):
        obs = np.zeros(self.length, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        done = self.position == self.length - 1
        return self._obs(), 1.0 if done else -0.01, done, False, {}


class Tagged(gym.Wrapper):
    def __init__(self, env, tag="none"):
        _note(made="Tagged", tag=tag)
        super().__init__(env)


gym.register("MyCorridor-v0", entry_point=Corridor, max_episode_steps=50)
'''


@pytest.fixture
def own_module(cli, tmp_path: Path) -> Path:
    """myenvs.py on the commands' PYTHONPATH; returns the log its objects write to."""
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "myenvs.py").write_text(MODULE)
    log = tmp_path / "made.jsonl"
    cli.env["PYTHONPATH"] = str(folder)
    cli.env["MYENVS_LOG"] = str(log)
    return log


def made(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


OWN = ["--env", "myenvs:MyCorridor-v0", "--env-kwargs", "length=4",
       "--wrapper", 'myenvs:Tagged(tag = "first")', "--wrapper", "myenvs:Tagged"]  # fmt: skip


@pytest.mark.slow
def test_a_module_s_environment_trains_in_every_process_with_its_kwargs_and_wrappers(
    cli, own_module: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    flags = ["--workers", "2", "--total-steps", "6000", "--eval-interval", "2000",
             "--eval-episodes", "3", "--run-dir", str(runs), "--quiet"]  # fmt: skip
    result = cli.run("a3c-train", *OWN, *flags)
    assert result.returncode == 0, result.stderr
    run = only_run(runs)
    config = (run / "config.toml").read_text()
    assert 'env = "myenvs:MyCorridor-v0"' in config
    assert "env_kwargs = { length = 4 }" in config
    assert 'wrappers = ["myenvs:Tagged(tag = \\"first\\")", "myenvs:Tagged"]' in config
    records = made(own_module)
    for process in ("a3c-worker-0", "a3c-worker-1", "a3c-evaluator"):
        mine = [r for r in records if r["process"] == process]
        corridors = [r for r in mine if r["made"] == "Corridor"]
        tags = [r["tag"] for r in mine if r["made"] == "Tagged"]
        assert corridors and all(r["length"] == 4 for r in corridors), process
        # Each env got both wrappers, in the order given.
        assert tags == ["first", "none"] * len(corridors), process
    # The best logged evaluation replays exactly, with nothing but the run folder given.
    evals = read_csv(run / "eval.csv")
    best = max(float(row["mean"]) for row in evals)
    replay = cli.run("a3c-eval", str(run), "--json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["mean"] == best

    # A resumed run makes its environments from the saved recipe.
    own_module.write_text("")
    more = cli.run("a3c-train", "--resume", str(run), "--total-steps", "8000", "--quiet")
    assert more.returncode == 0, more.stderr
    resumed = made(own_module)
    assert {r["process"] for r in resumed} >= {"a3c-worker-0", "a3c-worker-1", "a3c-evaluator"}
    assert all(r.get("length", 4) == 4 for r in resumed)
    assert [r["tag"] for r in resumed if r["made"] == "Tagged"][:2] == ["first", "none"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--env", "nosuchmodule:MyCorridor-v0"], "importing nosuchmodule failed: ModuleNotFound"),
        (["--env", "myenvs:Nothing-v0"], "importing myenvs registered no environment 'Nothing-v0'"),
        (["--env", "myenvs:MyCorridor-v0", "--wrapper", "myenvs:Missing"],
         "--wrapper myenvs:Missing: AttributeError"),
        (["--env", "myenvs:MyCorridor-v0", "--wrapper", "not a wrapper"],
         "expected module:callable"),
        (["--env", "myenvs:MyCorridor-v0", "--env-kwargs", "width=3"],
         "MyCorridor-v0 refused --env-kwargs: "),
        (["--env", "myenvs:MyCorridor-v0", "--env-kwargs", "width"], "expected KEY=VALUE"),
    ],
)  # fmt: skip
def test_bad_modules_wrappers_and_kwargs_are_one_line(
    cli, own_module: Path, tmp_path: Path, flags: list[str], expected: str
) -> None:
    result = cli.run("a3c-train", *flags, "--run-dir", str(tmp_path / "runs"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert not (tmp_path / "runs").exists()


def test_an_unknown_id_says_how_to_name_a_package_s_environment() -> None:
    with pytest.raises(UsageError, match="--env PACKAGE:ID imports it"):
        describe_env("SomePackage-Maze-v0")


def test_env_kwargs_reach_the_environment() -> None:
    slippery = make_env("FrozenLake-v1").unwrapped
    assert slippery.spec is not None and slippery.spec.kwargs.get("is_slippery", True)
    env = make_env(EnvRecipe("FrozenLake-v1", kwargs={"is_slippery": False}))
    env.reset(seed=0)
    # Without slipping, RIGHT RIGHT DOWN DOWN DOWN RIGHT always reaches the goal.
    rewards = [env.step(action)[1] for action in (2, 2, 1, 1, 1, 2)]
    assert rewards[-1] == 1.0


def test_the_episode_cap_truncates_and_bootstraps() -> None:
    env = make_env(EnvRecipe("CartPole-v1", max_episode_steps=5))
    env.reset(seed=0)
    steps = [env.step(0) for _ in range(5)]
    assert [s[3] for s in steps] == [False] * 4 + [True]
    assert not any(s[2] for s in steps)  # truncated, not terminated
    config = TrainConfig(env="CartPole-v1", workers=0, t_max=12, envs_per_worker=1,
                         max_episode_steps=5)  # fmt: skip
    worker = Worker(0, config, make_shared(config))
    rollout = worker.collect_rollout()
    worker.close()
    ends = np.flatnonzero(rollout.episode_end[:, 0])
    assert ends.tolist() == [4, 9]
    assert not rollout.terminal[ends, 0].any()
    assert (rollout.final_values[ends, 0] != 0).all()  # V(final observation) bootstraps
    assert [e.length for e in rollout.episodes] == [5, 5]


class SymbolGrid(gym.Env):
    """MiniGrid's shape of observation: a 7x7 grid of (object, colour, state) ids."""

    observation_space = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


gym.register("a3c-test/SymbolGrid-v0", entry_point=SymbolGrid)


def test_small_uint8_grids_are_symbols_and_the_rule_can_be_overridden() -> None:
    grid = describe_env("a3c-test/SymbolGrid-v0")
    assert grid.observation == GRID and grid.observation_shape == (7, 7, 3)
    assert grid.normalizes_observations and not grid.frames
    forced = describe_env(EnvRecipe("a3c-test/SymbolGrid-v0", observation="frames"))
    assert forced.observation == FRAMES and forced.observation_shape == (42, 42)
    with pytest.raises(UsageError, match="--observation flat applies to uint8 images"):
        describe_env(EnvRecipe("CartPole-v1", observation="flat"))
