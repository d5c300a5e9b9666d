"""Evaluation: play whole episodes with a frozen copy of the shared weights."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from a3c.agent import load_agent
from a3c.checkpoint import build_checkpoint, save_checkpoint
from a3c.config import TrainConfig
from a3c.envs import EnvRecipe, evaluation_env
from a3c.errors import UsageError
from a3c.faults import maybe_inject
from a3c.metrics import EvalRecord
from a3c.model import ActorCritic, State, build_model
from a3c.profile import EnvProfile
from a3c.sharing import Flag, SharedObjects, parent_alive

# Evaluation episodes use their own seeds, apart from every worker's (seed + rank).
EVAL_SEED_OFFSET = 1_000_000


@dataclass(frozen=True)
class EpisodeScores:
    """Real (unclipped) scores and lengths of evaluation episodes, and the actions played."""

    scores: list[float]
    lengths: list[int]
    actions: list[list[Any]]  # what each episode's env received, step by step

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores))

    @property
    def std(self) -> float:
        return float(np.std(self.scores))

    def record(self, step: int, seconds: float) -> EvalRecord:
        return EvalRecord(
            step=step,
            seconds=round(seconds, 3),
            mean=self.mean,
            std=self.std,
            min=float(np.min(self.scores)),
            max=float(np.max(self.scores)),
            mean_length=float(np.mean(self.lengths)),
            episodes=len(self.scores),
        )


class EvaluationInterrupted(Exception):
    """Training is stopping; an evaluation in progress is abandoned."""


# Steps between two looks at the stop flag while playing: an Atari episode can last minutes.
_STOP_CHECK_STEPS = 200
# Episodes played side by side, one batched forward pass per step for all of them: a
# trained Pong agent's ten games play 1.32 times as fast as one at a time (docs/atari.md).
MAX_PARALLEL_EPISODES = 16


def evaluation_envs(recipe: EnvRecipe | str, episodes: int, process_name: str) -> list[gym.Env]:
    """The envs to play `episodes` evaluation episodes side by side."""
    return [
        maybe_inject(evaluation_env(recipe), process_name)
        for _ in range(min(episodes, MAX_PARALLEL_EPISODES))
    ]


def _rows(state: State, rows: torch.Tensor) -> State:
    return None if state is None else (state[0][rows], state[1][rows])


@torch.no_grad()
def play_episodes(
    model: ActorCritic,
    envs: Sequence[gym.Env],
    profile: EnvProfile,
    episodes: int,
    seed: int,
    greedy: bool,
    max_steps: int,
    should_stop: Callable[[], bool] | None = None,
    noise: bool = False,
) -> EpisodeScores:
    """Play `episodes` episodes, `len(envs)` at a time; episode i starts from reset(seed=seed + i).

    The episodes of a round play side by side, one batched forward pass per step; an
    episode that ends stops stepping while the others go on. Episode i samples its
    actions from its own generator, seeded with seed + i. With the same weights, seed,
    policy, episode count and number of envs the result is the same every time, so a score
    logged during training is reproduced by `a3c-eval` (the batch a frame shares can move
    the model's outputs in their last bits). An episode is cut after `max_steps` steps and
    scored as it stands. Raises `EvaluationInterrupted` soon after `should_stop()` turns
    true. NoisyNet layers play their mean weights, or with `noise` a new sample per
    episode from that episode's generator; one sample serves a whole batch, so noisy
    episodes play one at a time.
    """
    model.remove_noise()
    per_round = 1 if noise else len(envs)
    scores: list[float] = []
    lengths: list[int] = []
    actions: list[list[Any]] = []
    for first in range(0, episodes, per_round):
        played = range(first, min(first + per_round, episodes))
        generators = [torch.Generator().manual_seed(seed + episode) for episode in played]
        if noise:
            model.sample_noise(generators[0])
        round_envs = envs[: len(played)]
        obs = np.stack(
            [
                env.reset(seed=seed + episode)[0]
                for env, episode in zip(round_envs, played, strict=True)
            ]
        )
        state = model.initial_state(len(played))
        score = [0.0] * len(played)
        taken: list[list[Any]] = [[] for _ in played]
        active = np.ones(len(played), dtype=bool)
        length = 0
        while active.any() and length < max_steps:
            if should_stop is not None and length % _STOP_CHECK_STEPS == 0 and should_stop():
                raise EvaluationInterrupted
            rows = np.flatnonzero(active)
            index = torch.as_tensor(rows)
            chosen, row_state = model.act(
                torch.as_tensor(obs[rows]),
                _rows(state, index),
                greedy=greedy,
                generators=[generators[row] for row in rows],
            )
            if state is not None and row_state is not None:
                state[0][index], state[1][index] = row_state
            for row, action in zip(rows.tolist(), chosen.numpy(), strict=True):
                env_action = profile.env_action(action)
                obs[row], reward, terminated, truncated, _ = round_envs[row].step(env_action)
                score[row] += float(reward)
                taken[row].append(env_action)
                active[row] = not (terminated or truncated)
            length += 1
        scores.extend(score)
        lengths.extend(len(steps) for steps in taken)
        actions.extend(taken)
    return EpisodeScores(scores, lengths, actions)


class Evaluator:
    """Evaluates the shared weights every `eval_interval` steps and keeps best.pt."""

    def __init__(
        self,
        config: TrainConfig,
        shared: SharedObjects,
        best_checkpoint: Path,
        start_time: float,
        best_score: float | None = None,
    ) -> None:
        self.config = config
        self.shared = shared
        self.best_checkpoint = best_checkpoint
        self.start_time = start_time
        self.best_score = -math.inf if best_score is None else best_score
        self.envs = evaluation_envs(EnvRecipe.of(config), config.eval_episodes, "a3c-evaluator")
        self.model = build_model(config, shared.profile)
        self.model.eval()
        self.last_step: int | None = None
        self.next_step = self._next_after(shared.steps_done)

    def _next_after(self, step: int) -> int:
        interval = self.config.eval_interval
        return (step // interval + 1) * interval

    def close(self) -> None:
        for env in self.envs:
            env.close()

    @property
    def due(self) -> bool:
        return self.shared.steps_done >= self.next_step

    def evaluate(self) -> EvalRecord:
        """Evaluate the shared weights as they are now; write best.pt if they did best.

        The record's step and wall time are the snapshot's: what the weights of that
        moment score, however long the games take to play.
        """
        step = self.shared.steps_done
        seconds = time.time() - self.start_time
        with self.shared.updates_paused():  # never a meeting's half-written weights
            snapshot = build_checkpoint(
                model=self.shared.model,
                optimizer=self.shared.optimizer,
                config=self.config,
                step=step,
                episodes=self.shared.episodes_done,
                best_score=None,
                seconds=seconds,
            )
        self.model.load_state_dict(snapshot["model"])
        scores = play_episodes(
            self.model,
            self.envs,
            self.shared.profile,
            self.config.eval_episodes,
            seed=self.config.seed + EVAL_SEED_OFFSET,
            greedy=self.config.eval_policy == "greedy",
            max_steps=self.config.eval_max_steps,
            should_stop=lambda: self.shared.stop.is_set() or not parent_alive(),
            noise=self.config.eval_noise,
        )
        record = scores.record(step, seconds)
        if record.mean > self.best_score:
            self.best_score = record.mean
            snapshot["best_score"] = record.mean
            save_checkpoint(snapshot, self.best_checkpoint)
        self.shared.messages.put(record)
        self.last_step = step
        self.next_step = self._next_after(step)
        return record


def run_evaluator(
    config: TrainConfig,
    shared: SharedObjects,
    best_checkpoint: Path,
    start_time: float,
    training_done: Flag,
    best_score: float | None,
) -> None:
    """Entry point of the evaluation process; evaluates the final weights once training ends."""
    torch.set_num_threads(1)
    evaluator = Evaluator(config, shared, best_checkpoint, start_time, best_score)
    with contextlib.suppress(EvaluationInterrupted), contextlib.closing(evaluator):
        while not shared.stop.is_set() and parent_alive():
            if training_done.is_set():
                if evaluator.last_step != shared.steps_done:
                    evaluator.evaluate()
                break
            if evaluator.due:
                evaluator.evaluate()
            else:
                time.sleep(0.05)


class _VideoRecorder(gym.Wrapper):
    """Appends every rendered frame, from each reset on, to an open imageio writer."""

    def __init__(self, env: gym.Env, writer: Any) -> None:
        super().__init__(env)
        self.writer = writer

    def reset(self, **kwargs: Any) -> Any:
        result = self.env.reset(**kwargs)
        self.writer.append_data(self.env.render())
        return result

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        self.writer.append_data(self.env.render())
        return result


def _open_video(path: Path, fps: int) -> Any:
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise UsageError("--video needs the video extra: pip install 'a3c[video]'") from None
    try:
        return imageio.get_writer(path, fps=fps, macro_block_size=1)
    except (OSError, ValueError, RuntimeError) as error:
        raise UsageError(f"cannot write video {path}: {error}") from None


def evaluate_checkpoint(
    path: str | Path,
    episodes: int | None = None,
    seed: int | None = None,
    greedy: bool | None = None,
    video: Path | None = None,
    noise: bool | None = None,
) -> dict[str, Any]:
    """Rebuild env and model from a checkpoint and play it; the report `a3c-eval` prints.

    By default the episode count, seeds and policy are the ones the training evaluator
    used, so the mean equals the evaluation score logged for the same weights. With
    `video`, the episodes are played again, action for action, in an env that renders,
    and every frame goes into that file.
    """
    agent = load_agent(path)
    config = agent.config
    episodes = config.eval_episodes if episodes is None else episodes
    seed = config.seed + EVAL_SEED_OFFSET if seed is None else seed
    greedy = config.eval_policy == "greedy" if greedy is None else greedy
    noise = config.eval_noise if noise is None else noise
    if noise and not config.noisy:
        raise UsageError(f"--eval-noise: {path} has no NoisyNet layers (trained without --noisy)")
    # Opened before playing, so a missing renderer or codec is reported at once.
    with contextlib.ExitStack() as cleanup:
        replay = _open_replay(config, video, cleanup) if video is not None else None
        envs = evaluation_envs(agent.recipe, episodes, "a3c-eval")
        for env in envs:
            cleanup.callback(env.close)
        scores = play_episodes(
            agent.model,
            envs,
            agent.profile,
            episodes,
            seed=seed,
            greedy=greedy,
            max_steps=config.eval_max_steps,
            noise=noise,
        )
        replayed = None if replay is None else _replay(replay, scores, seed)
    report = {
        "checkpoint": str(path),
        "env": config.env,
        "step": agent.checkpoint["step"],
        "episodes": episodes,
        "seed": seed,
        "policy": "greedy" if greedy else "sample",
        "noise": noise,
        "mean": scores.mean,
        "std": scores.std,
        "min": min(scores.scores),
        "max": max(scores.scores),
        "mean_length": float(np.mean(scores.lengths)),
        "scores": scores.scores,
        "lengths": scores.lengths,
        "video": None if video is None else str(video),
    }
    if replayed is not None and replayed != scores.scores:
        # An env that is not deterministic given its seed and actions: the video shows
        # other games than the ones scored.
        report["video_scores"] = replayed
    return report


def _open_replay(config: TrainConfig, video: Path, cleanup: contextlib.ExitStack) -> gym.Env:
    """An env that renders into `video`, closed (and the file finished) by `cleanup`."""
    try:
        env = evaluation_env(EnvRecipe.of(config), render_mode="rgb_array")
    except gym.error.DependencyNotInstalled as error:
        raise UsageError(f"cannot render {config.env} for --video: {error}") from None
    cleanup.callback(env.close)
    writer = _open_video(video, fps=int(env.metadata.get("render_fps") or 30))
    cleanup.callback(writer.close)
    return _VideoRecorder(env, writer)


def _replay(env: gym.Env, scores: EpisodeScores, seed: int) -> list[float]:
    """Play the evaluated episodes again from their seeds and actions; their scores."""
    replayed = []
    for episode, actions in enumerate(scores.actions):
        env.reset(seed=seed + episode)
        score = 0.0
        for action in actions:
            score += float(env.step(action)[1])
        replayed.append(score)
    return replayed
