"""The peers a3c is measured against, each set up the way its own project sets it up.

- `ppo-zoo` and `a2c-zoo`: Stable-Baselines3's PPO and A2C built by rl-baselines3-zoo's own
  `ExperimentManager` from the hyperparameter files the `rl-zoo3` package ships (the
  env's entry, or `atari` for an Atari game): its number of envs, wrappers, frame stacking,
  `VecNormalize`, linear schedules over the zoo's `n_timesteps`, policy kwargs. Nothing is
  re-typed here, so the settings are the zoo's release's. Needs `pip install -e ".[bench]"`.
- `sf-appo`: Sample Factory's Atari example (`sf_examples.atari.train_atari`, its own
  defaults) in a virtual environment of its own under runs/peers-venv, made on first use:
  Sample Factory 2 pins gymnasium below 1.0, which a3c's environment cannot have.

Each peer trains until its wall time is up, counted from after its imports.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ZOO_SIDES = {"ppo-zoo": "ppo", "a2c-zoo": "a2c"}


# ------------------------------------------------------------------ rl-baselines3-zoo


def zoo_experiment(algo: str, env_id: str, seed: int, folder: Path) -> tuple[Any, Any]:
    """The zoo's ExperimentManager for `algo` on `env_id` and the model it builds, exactly
    as `python -m rl_zoo3.train --algo ALGO --env ENV --seed SEED` would, minus its own
    evaluation callback (`--eval-freq -1`); its logs go to `folder`."""
    from rl_zoo3.exp_manager import ExperimentManager

    arguments = argparse.Namespace(algo=algo, env=env_id, seed=seed, eval_freq=-1)
    manager = ExperimentManager(
        arguments, algo, env_id, str(folder), eval_freq=-1, seed=seed, verbose=0
    )
    with contextlib.redirect_stdout(sys.stderr):  # the zoo prints its settings
        built = manager.setup_experiment()
    assert built is not None
    model, _ = built
    return manager, model


def zoo_learn(
    manager: Any,
    model: Any,
    seconds: float,
    every: Callable[[float], bool],
    on_mark: Callable[[float], float],
) -> float:
    """Learn once over the zoo's whole `n_timesteps` (so its linear schedules decay as the
    zoo's do) and stop after `seconds`. `every(clock)` says whether to call `on_mark(clock)`
    now, between two steps; whatever on_mark returns (seconds spent off the clock, say to
    save a snapshot) is taken off it. Returns the seconds trained."""
    from stable_baselines3.common.callbacks import BaseCallback

    class WallClock(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.started = time.monotonic()
            self.paused = 0.0

        def clock(self) -> float:
            return time.monotonic() - self.started - self.paused

        def _on_step(self) -> bool:
            if every(self.clock()):
                self.paused += on_mark(self.clock())
            return self.clock() < seconds

    callback = WallClock()
    model.learn(manager.n_timesteps, callback=callback)
    return callback.clock()


def zoo_evaluate(
    manager: Any, model: Any, episodes: int, seed: int
) -> tuple[list[float], list[int]]:
    """`episodes` whole episodes by the zoo's rules: greedy actions except on Atari and
    MiniGrid, where `enjoy.py` samples them; observation statistics from training, rewards
    unnormalised; scores as Monitor counts them (whole games, unclipped). Outside Atari,
    episode i starts from reset(seed=seed + i), as `a3c-eval --seed` plays them, so two
    sides given the same seed play the same starts; Atari's 10 parallel games take seeds
    seed to seed + 9 once."""
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import sync_envs_normalization

    with contextlib.redirect_stdout(sys.stderr):
        environment = manager.create_envs(
            min(episodes, 10) if manager._is_atari else 1, eval_env=True
        )
    if model.get_env() is not None:
        sync_envs_normalization(model.get_env(), environment)
    torch.manual_seed(seed)  # SB3 samples its actions from torch's global generator
    batches = [(seed, episodes)] if manager._is_atari else [(seed + i, 1) for i in range(episodes)]
    scores: list[float] = []
    lengths: list[int] = []
    for first_seed, count in batches:
        environment.seed(first_seed)  # taken by evaluate_policy's reset
        batch_scores, batch_lengths = evaluate_policy(
            model,
            environment,
            n_eval_episodes=count,
            deterministic=manager.deterministic_eval,
            return_episode_rewards=True,
        )
        scores += [float(s) for s in batch_scores]
        lengths += [int(n) for n in batch_lengths]
    environment.close()
    return scores, lengths


# ----------------------------------------------------------------------- Sample Factory

SAMPLE_FACTORY = ["sample-factory==2.1.1", "ale-py>=0.9,<0.10"]
# ale-py 0.9 registers its ids only when asked, and Sample Factory starts its workers with
# spawn, which imports this file again in each of them: so the ids are registered here.
SF_LAUNCHER = """\
import sys
import gymnasium
from ale_py.registration import register_v0_v4_envs
if "PongNoFrameskip-v4" not in gymnasium.registry:
    register_v0_v4_envs()
if __name__ == "__main__":
    from sf_examples.atari.train_atari import main
    sys.exit(main())
"""


# Plays one checkpoint of the Atari example for whole games (a lost life ends none), its
# actions sampled as its enjoy.py plays them, from one environment seeded once; prints the
# games' scores and lengths in frames as JSON. enjoy.py itself reports the mean of lives.
SF_PLAYER = """\
import json
import sys

import sf_atari  # registers the Atari ids


def play(env, train_dir, checkpoint, episodes, seed):
    import torch
    from sample_factory.algo.sampling.batched_sampling import preprocess_actions
    from sample_factory.algo.utils.env_info import extract_env_info
    from sample_factory.algo.utils.make_env import make_env_func_batched
    from sample_factory.algo.utils.rl_utils import make_dones, prepare_and_normalize_obs
    from sample_factory.cfg.arguments import load_from_checkpoint
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size
    from sample_factory.utils.attr_dict import AttrDict
    from sf_examples.atari.train_atari import parse_atari_args, register_atari_components

    torch.set_num_threads(1)  # checkpoints are played two at a time, one per core
    register_atari_components()
    argv = ["--env", env, "--experiment", "sf-appo", "--train_dir", train_dir,
            "--device", "cpu", "--no_render"]
    cfg = load_from_checkpoint(parse_atari_args(argv, evaluation=True))
    cfg.num_envs = 1
    game = make_env_func_batched(
        cfg, env_config=AttrDict(worker_index=0, vector_index=0, env_id=0), render_mode=None
    )
    model = create_actor_critic(cfg, game.observation_space, game.action_space)
    model.eval()
    # Its own loader (Learner.load_checkpoint) fails on torch >= 2.6, whose torch.load
    # refuses the numpy values in its checkpoints unless told they are trusted (they are:
    # the run just wrote them).
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    model.load_state_dict(saved["model"])
    env_info = extract_env_info(game, cfg)
    scores, lengths = [], []
    obs, _ = game.reset(seed=seed)
    rnn_states = torch.zeros([1, get_rnn_size(cfg)])
    with torch.no_grad():
        while len(scores) < episodes:
            out = model(prepare_and_normalize_obs(model, obs), rnn_states)
            actions = out["actions"]
            if actions.ndim == 1:
                actions = actions.unsqueeze(-1)
            rnn_states = out["new_rnn_states"]
            obs, _, terminated, truncated, infos = game.step(preprocess_actions(env_info, actions))
            if make_dones(terminated, truncated)[0] and "episode" in infos[0]:
                scores.append(float(infos[0]["episode"]["r"].item()))
                lengths.append(int(infos[0]["episode"]["l"].item()))
    print(json.dumps({"scores": scores, "lengths": lengths}))


if __name__ == "__main__":
    env, train_dir, checkpoint, episodes, seed = sys.argv[1:]
    play(env, train_dir, checkpoint, int(episodes), int(seed))
"""


def sample_factory_python(venvs: Path) -> Path:
    """The Python of Sample Factory's own virtual environment, made on first use with the
    torch this machine installs (pip's constraints pick the CPU wheel)."""
    venv = venvs / "sample-factory"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        torch_version = __import__("torch").__version__.split("+")[0]
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"torch=={torch_version}",
             *SAMPLE_FACTORY],
            check=True,
        )  # fmt: skip
    (venv / "sf_atari.py").write_text(SF_LAUNCHER)
    (venv / "sf_play.py").write_text(SF_PLAYER)
    return python


def sample_factory_name(env_id: str) -> str:
    """Sample Factory's name for an Atari id: PongNoFrameskip-v4 is atari_pong."""
    game = re.sub(r"NoFrameskip-v\d+$", "", env_id)
    return "atari_" + game.lower()


def run_sample_factory(
    env_id: str, seconds: float, out: Path, venvs: Path, seed: int, save_every: float
) -> Path:
    """Sample Factory's Atari example on the CPU for `seconds` from its first report (after
    its imports and start-up), a checkpoint every `save_every` seconds (all kept); returns
    its experiment folder. It is stopped with SIGINT, on which it saves and exits: its own
    --train_for_seconds is never counted in 2.1.1 (`total_train_seconds` stays 0)."""
    python = sample_factory_python(venvs)
    out.mkdir(parents=True, exist_ok=True)
    command = [
        str(python), str(python.parent.parent / "sf_atari.py"),
        "--env", sample_factory_name(env_id), "--experiment", "sf-appo",
        "--train_dir", str(out), "--device", "cpu", "--seed", str(seed),
        "--save_every_sec", str(int(save_every)), "--keep_checkpoints", "1000",
    ]  # fmt: skip
    log_path = out / "sample-factory.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        started = None
        while process.poll() is None:
            if started is None and "Fps is" in log_path.read_text(errors="replace"):
                started = time.monotonic()
            if started is not None and time.monotonic() - started >= seconds:
                process.send_signal(signal.SIGINT)
                break
            time.sleep(1.0)
        try:
            process.wait(timeout=180)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if started is None:
        raise RuntimeError(f"Sample Factory never started; its output is in {log_path}")
    return out / "sf-appo"


def play_sample_factory(
    python: Path, env_id: str, checkpoint: Path, episodes: int, seed: int
) -> tuple[list[float], list[int]]:
    """Scores and agent steps of `episodes` whole games of a Sample Factory checkpoint
    (in its experiment folder's checkpoint_p0), played by SF_PLAYER with `python`, the one
    `sample_factory_python` made (not called here: it rewrites the player, which a player
    on the other core may be starting from)."""
    train_dir = checkpoint.parent.parent.parent
    played = subprocess.run(
        [str(python), str(python.parent.parent / "sf_play.py"), sample_factory_name(env_id),
         str(train_dir), str(checkpoint), str(episodes), str(seed)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    games = json.loads(played.stdout.strip().splitlines()[-1])
    return games["scores"], [frames // 4 for frames in games["lengths"]]
