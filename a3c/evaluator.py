"""Evaluation: play whole episodes with a frozen copy of the shared weights."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from a3c.checkpoint import build_checkpoint, load_checkpoint, save_checkpoint
from a3c.config import TrainConfig
from a3c.envs import EnvInfo, make_env
from a3c.errors import UsageError
from a3c.faults import maybe_inject
from a3c.metrics import EvalRecord
from a3c.model import ActorCritic, build_model
from a3c.worker import SharedObjects, parent_alive

# Evaluation episodes use their own seeds, apart from every worker's (seed + rank).
EVAL_SEED_OFFSET = 1_000_000


@dataclass(frozen=True)
class EpisodeScores:
    """Real (unclipped) scores and lengths of evaluation episodes."""

    scores: list[float]
    lengths: list[int]

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
        )


class EvaluationInterrupted(Exception):
    """Training is stopping; an evaluation in progress is abandoned."""


# Steps between two looks at the stop flag while playing: an Atari episode can last minutes.
_STOP_CHECK_STEPS = 200


@torch.no_grad()
def play_episodes(
    model: ActorCritic,
    env: gym.Env,
    episodes: int,
    seed: int,
    greedy: bool,
    max_steps: int,
    should_stop: Callable[[], bool] | None = None,
    noise: bool = False,
) -> EpisodeScores:
    """Play `episodes` episodes; episode i starts from reset(seed=seed + i).

    With the same weights, seed and policy the result is the same every time, so a score
    logged during training can be reproduced by `a3c-eval`. An episode is cut after
    `max_steps` steps and scored as it stands. Raises `EvaluationInterrupted` soon after
    `should_stop()` turns true. NoisyNet layers play their mean weights, or with `noise`
    a new sample per episode, drawn from the seeded generator too.
    """
    generator = torch.Generator().manual_seed(seed)
    info = EnvInfo.of(env)
    model.remove_noise()
    scores, lengths = [], []
    for episode in range(episodes):
        if noise:
            model.sample_noise(generator)
        obs, _ = env.reset(seed=seed + episode)
        state = model.initial_state()
        score, length, done = 0.0, 0, False
        while not done and length < max_steps:
            if should_stop is not None and length % _STOP_CHECK_STEPS == 0 and should_stop():
                raise EvaluationInterrupted
            action, state = model.act(
                torch.as_tensor(obs).unsqueeze(0), state, greedy=greedy, generator=generator
            )
            obs, reward, terminated, truncated, _ = env.step(info.env_action(action[0].numpy()))
            score += float(reward)
            length += 1
            done = terminated or truncated
        scores.append(score)
        lengths.append(length)
    return EpisodeScores(scores, lengths)


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
        self.env = maybe_inject(make_env(config.env, frame_size=config.frame_size), "a3c-evaluator")
        self.model = build_model(config, EnvInfo.of(self.env))
        self.model.eval()
        self.last_step: int | None = None
        self.next_step = self._next_after(shared.steps_done)

    def _next_after(self, step: int) -> int:
        interval = self.config.eval_interval
        return (step // interval + 1) * interval

    def close(self) -> None:
        self.env.close()

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
            self.env,
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
    training_done: Any,
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
                training_done.wait(0.05)


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
    episodes: int,
    seed: int | None = None,
    greedy: bool | None = None,
    video: Path | None = None,
    noise: bool | None = None,
) -> dict[str, Any]:
    """Rebuild env and model from a checkpoint and play it; the report `a3c-eval` prints.

    By default the seed and policy are the ones the training evaluator used, so the mean
    equals the evaluation score logged for the same weights. With `video`, every frame of
    every episode goes into that file.
    """
    checkpoint = load_checkpoint(path)
    config = TrainConfig.from_dict(checkpoint["config"], source=f"{path} config")
    seed = config.seed + EVAL_SEED_OFFSET if seed is None else seed
    greedy = config.eval_policy == "greedy" if greedy is None else greedy
    noise = config.eval_noise if noise is None else noise
    if noise and not config.noisy:
        raise UsageError(f"--eval-noise: {path} has no NoisyNet layers (trained without --noisy)")
    writer = None
    try:
        env = make_env(
            config.env, frame_size=config.frame_size, render_mode="rgb_array" if video else None
        )
    except gym.error.DependencyNotInstalled as error:
        raise UsageError(f"cannot render {config.env} for --video: {error}") from None
    if video is not None:
        writer = _open_video(video, fps=int(env.metadata.get("render_fps") or 30))
        env = _VideoRecorder(env, writer)
    try:
        model = build_model(config, EnvInfo.of(env))
        try:
            model.load_state_dict(checkpoint["model"])
        except (RuntimeError, KeyError) as error:
            raise UsageError(
                f"{path}: weights do not fit the model its config describes"
            ) from error
        model.eval()
        scores = play_episodes(
            model,
            env,
            episodes,
            seed=seed,
            greedy=greedy,
            max_steps=config.eval_max_steps,
            noise=noise,
        )
    finally:
        env.close()
        if writer is not None:
            writer.close()
    return {
        "checkpoint": str(path),
        "env": config.env,
        "step": checkpoint["step"],
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
