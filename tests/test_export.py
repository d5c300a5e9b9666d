"""a3c-export: the exported graph plays as a3c-eval does, in TorchScript and in ONNX."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import a3c
from a3c.evaluator import EVAL_SEED_OFFSET, evaluation_envs, play_episodes
from a3c.export import export_agent

# Each test plays agents trained here for the purpose: end-to-end runs.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
EPISODES = 2

AGENTS = {
    "cartpole": {"env": "CartPole-v1", "total_steps": 3000},
    "pong": {"env": "PongNoFrameskip-v4", "total_steps": 640, "eval_max_steps": 100,
             "precision": "float32"},
    "pendulum": {"env": "Pendulum-v1", "total_steps": 2000, "eval_max_steps": 100},
    "frozenlake": {"env": "FrozenLake-v1", "total_steps": 3000},
}  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A briefly trained agent of each kind, by name: its run folder."""
    runs = {}
    for name, settings in AGENTS.items():
        folder = tmp_path_factory.mktemp(name)
        result = a3c.train(**settings, workers=0, eval_interval=1000, eval_episodes=EPISODES,
                           run_dir=str(folder), quiet=True)  # fmt: skip
        runs[name] = result.run_dir
    return runs


def runner(path: Path, form: str):
    """The exported graph as a function of numpy arrays, run by its own runtime."""
    if form == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path))
        names = [i.name for i in session.get_inputs()]
        return lambda *arrays: session.run(None, dict(zip(names, arrays, strict=True)))
    module = torch.jit.load(str(path))

    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        out = module(*(torch.from_numpy(a) for a in arrays))
        return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]

    return run


def play_exported(run, agent, seed: int, raw_states: bool) -> tuple[float, list]:
    """An episode as a user of the exported graph plays it: the env, the graph, nothing of
    a3c's model. A Discrete state goes in as the index the environment gives."""
    env = gym.make(agent.config.env) if raw_states else agent.make_env()
    observation, _ = env.reset(seed=seed)
    hidden = agent.config.hidden_size
    state = [np.zeros((1, hidden), np.float32)] * 2 if agent.config.lstm else []
    score, actions = 0.0, []
    for _ in range(agent.config.eval_max_steps):
        batch = np.asarray([observation], dtype=np.int64 if raw_states else None)
        action, *state = run(batch, *state)
        taken = action[0] if not agent.profile.continuous else action[0].astype(np.float32)
        actions.append(taken.item() if taken.ndim == 0 else taken)
        observation, reward, terminated, truncated, _ = env.step(actions[-1])
        score += float(reward)
        if terminated or truncated:
            break
    env.close()
    return score, actions


@pytest.mark.parametrize("form", ["torchscript", "onnx"])
@pytest.mark.parametrize("name", list(AGENTS))
def test_the_exported_agent_plays_a3c_eval_s_games(
    trained: dict[str, Path], tmp_path: Path, name: str, form: str
) -> None:
    if name == "pong":
        pytest.importorskip("ale_py")
    output = tmp_path / ("agent.onnx" if form == "onnx" else "agent.pt")
    info = export_agent(trained[name], output)
    assert info["format"] == form and json.loads(Path(f"{output}.json").read_text()) == info
    agent = a3c.load_agent(trained[name], greedy=True)
    seed = agent.config.seed + EVAL_SEED_OFFSET
    raw_states = name == "frozenlake"
    run = runner(output, form)
    for episode in range(EPISODES):
        envs = evaluation_envs(agent.recipe, 1, "test")
        played = play_episodes(agent.model, envs, agent.profile, 1, seed=seed + episode,
                               greedy=True, max_steps=agent.config.eval_max_steps)  # fmt: skip
        score, actions = play_exported(run, agent, seed + episode, raw_states)
        expected = played.actions[0]
        alone = a3c.evaluate(trained[name], episodes=1, seed=seed + episode, greedy=True)
        assert len(actions) == len(expected) and played.scores[0] == alone["mean"]
        if agent.profile.continuous:
            # Another runtime's kernels round a Gaussian's mean in its last bits.
            for ours, theirs in zip(actions, expected, strict=True):
                np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=0)
            assert score == pytest.approx(alone["mean"], rel=1e-6)
        else:
            assert actions == expected
            assert score == alone["mean"]


@pytest.mark.parametrize("form", ["torchscript", "onnx"])
@pytest.mark.parametrize("name", ["pong", "pendulum"])
def test_sampling_outputs_are_the_model_s_to_1e_5(
    trained: dict[str, Path], tmp_path: Path, name: str, form: str
) -> None:
    output = tmp_path / ("agent.onnx" if form == "onnx" else "agent.pt")
    export_agent(trained[name], output, sample=True)
    agent = a3c.load_agent(trained[name])
    generator = np.random.default_rng(0)
    shape, dtype = agent.profile.observation_shape, agent.profile.observation_dtype
    batch = (generator.random((4, *shape)) * (255 if dtype == np.uint8 else 2)).astype(dtype)
    state = agent.model.initial_state(4)
    with torch.no_grad():
        params, _, _ = agent.model(torch.from_numpy(batch), state)
    inputs = [batch] + ([s.numpy() for s in state] if state is not None else [])
    got = runner(output, form)(*inputs)[0]
    np.testing.assert_allclose(got, params.numpy(), atol=1e-5, rtol=0)


def test_the_command_writes_the_graph_and_its_description(
    cli, trained: dict[str, Path], tmp_path: Path
) -> None:
    output = tmp_path / "cartpole.onnx"
    result = cli.run("a3c-export", str(trained["cartpole"]), "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert output.is_file() and "inputs observation; outputs action" in result.stdout
    info = json.loads(Path(f"{output}.json").read_text())
    assert info["env"] == "CartPole-v1" and info["tensors"]["observation"]["shape"] == ["batch", 4]
    refused = cli.run("a3c-export", str(trained["cartpole"]), "-o", str(tmp_path / "a.zip"))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1


def test_the_documented_examples_run_as_written(trained: dict[str, Path], tmp_path: Path) -> None:
    """docs/export.md plays CartPole with onnxruntime and numpy alone, and with TorchScript."""
    page = (REPO / "docs" / "export.md").read_text()
    examples = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    assert len(examples) == 2
    export_agent(trained["cartpole"], tmp_path / "cartpole.onnx")
    export_agent(trained["cartpole"], tmp_path / "cartpole.pt")
    for index, example in enumerate(examples):
        (tmp_path / f"example{index}.py").write_text(example)
        result = subprocess.run([sys.executable, f"example{index}.py"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert "score" in result.stdout
        if "onnxruntime" in example:
            assert "import torch" not in example and "a3c" not in example
