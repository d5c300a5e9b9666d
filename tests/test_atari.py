"""Atari through ale-py: preprocessing, frame skip, reward clipping, life loss, a real run."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import make_shared, only_run, read_csv
from torch import nn

from a3c.batches import AtariVectorBatch, GymEnvBatch, atari_path, make_env_batch
from a3c.checkpoint import load_checkpoint
from a3c.config import TrainConfig, model_settings
from a3c.envs import EnvRecipe, FireAtLifeStart, describe_env, make_env
from a3c.errors import UsageError
from a3c.evaluator import evaluation_envs, play_episodes
from a3c.host import bfloat16_frames, native_bfloat16
from a3c.model import ActorCritic, build_model
from a3c.presets import find_preset
from a3c.worker import Worker

pytestmark = pytest.mark.atari


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "ALE/Pong-v5"])
@pytest.mark.parametrize("frame_size", [42, 84])
def test_observations_are_square_uint8_frames(env_id: str, frame_size: int) -> None:
    env = make_env(EnvRecipe(env_id, frame_size=frame_size))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (frame_size, frame_size) and obs.dtype == np.uint8
    obs, *_ = env.step(0)
    assert obs.shape == (frame_size, frame_size) and obs.dtype == np.uint8
    assert 0 < obs.max() <= 255
    env.close()


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "ALE/Pong-v5", "BreakoutNoFrameskip-v4"])
def test_each_agent_step_is_exactly_four_emulator_frames(env_id: str) -> None:
    env = make_env(env_id)
    env.reset(seed=0)
    ale = env.unwrapped.ale
    for _ in range(50):
        before = ale.getEpisodeFrameNumber()
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        assert not (terminated or truncated)
        assert ale.getEpisodeFrameNumber() - before == 4
    env.close()

    # The vector path, which workers use, steps the same four frames.
    batch = vector_batch(env_id, 3)
    batch.reset([0, 1, 2])
    before = None
    for _ in range(50):
        _, _, terminated, truncated, info = batch.env.step(np.zeros(3, dtype=np.int32))
        assert not (terminated.any() or truncated.any())
        if before is not None:
            assert (info["episode_frame_number"] - before == 4).all()
        before = info["episode_frame_number"]
    batch.close()


def vector_batch(env_id: str, count: int, noop_max: int = 30) -> AtariVectorBatch:
    profile = describe_env(env_id)
    batch = make_env_batch(
        EnvRecipe(env_id), profile, count, workers=1, process_name="test", noop_max=noop_max
    )
    assert isinstance(batch, AtariVectorBatch), "workers step Atari games in ale-py's vector env"
    return batch


def gymnasium_batch(env_id: str, count: int, noop_max: int = 30) -> GymEnvBatch:
    envs = [make_env(env_id, noop_max=noop_max) for _ in range(count)]
    return GymEnvBatch(envs, describe_env(env_id))


def play_both(env_id: str, steps: int, count: int = 2, noop_max: int = 0):
    """Both paths through the same actions, step by step: pairs of BatchStep."""
    vector, gymnasium = (
        vector_batch(env_id, count, noop_max),
        gymnasium_batch(env_id, count, noop_max),
    )
    assert vector.profile == gymnasium.profile
    first = [batch.reset(list(range(count))) for batch in (vector, gymnasium)]
    actions = np.random.default_rng(0).integers(0, vector.profile.n_actions, (steps, count))
    pairs = [(vector.step(a), gymnasium.step(a)) for a in actions]
    vector.close()
    gymnasium.close()
    return first, pairs


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"])
def test_the_vector_path_replays_the_gymnasium_path_frame_for_frame(env_id: str) -> None:
    """v4 without sticky actions is deterministic once the no-ops are fixed (none): the
    same actions give the same frames, real rewards, lives, episode ends and scores."""
    ((v_obs, v_lives), (g_obs, g_lives)), pairs = play_both(env_id, steps=1100)
    assert v_obs.shape == g_obs.shape == (2, 42, 42) and v_obs.dtype == g_obs.dtype == np.uint8
    assert np.array_equal(v_obs, g_obs) and np.array_equal(v_lives, g_lives)
    scores, running = [], np.zeros(2)
    for vector, gymnasium in pairs:
        assert np.array_equal(vector.observations, gymnasium.observations)
        for name in ("rewards", "terminated", "truncated", "lives"):
            assert np.array_equal(getattr(vector, name), getattr(gymnasium, name)), name
        assert vector.episodes == gymnasium.episodes
        running += vector.rewards
        for index, score, _ in vector.episodes:
            assert score == running[index], "an episode's score is the sum of its real rewards"
            scores.append(score)
            running[index] = 0.0
    # Real scores, not clipped ones: every random game of Pong ends at 21 points to the
    # opponent.
    assert len(scores) >= 2
    if env_id.startswith("Pong"):
        assert all(-21 <= score <= -19 for score in scores)


def test_a_truncated_episode_keeps_its_last_frame_on_both_paths() -> None:
    """A truncation resets in the same step; the frame the episode was cut at comes back
    apart from the new episode's first frame, for the critic's bootstrap."""
    gym.register(
        "a3c-test/PongShort-v4",
        entry_point="ale_py.env:AtariEnv",
        kwargs={"game": "pong", "frameskip": 1, "repeat_action_probability": 0.0,
                "max_num_frames_per_episode": 400},
    )  # fmt: skip
    _, pairs = play_both("a3c-test/PongShort-v4", steps=100)
    vector, gymnasium = pairs[-1]
    assert vector.truncated.all() and not vector.terminated.any()
    assert [length for _, _, length in vector.episodes] == [100, 100]
    assert vector.episodes == gymnasium.episodes
    for index in (0, 1):
        cut_at = vector.final_observations[index]
        assert np.array_equal(cut_at, gymnasium.final_observations[index])
        assert not np.array_equal(cut_at, vector.observations[index])
    assert np.array_equal(vector.observations, gymnasium.observations)


def test_sticky_v5_frames_look_the_same_on_both_paths() -> None:
    """v5's sticky actions draw from each path's own generator, so the games part at the
    first step; the frames still have one shape, dtype and pixel statistics."""
    _, pairs = play_both("ALE/Pong-v5", steps=600, count=4, noop_max=30)
    vector = np.stack([v.observations for v, _ in pairs]).astype(np.float64)
    gymnasium = np.stack([g.observations for _, g in pairs]).astype(np.float64)
    assert vector.shape == gymnasium.shape
    assert abs(vector.mean() - gymnasium.mean()) < 0.01 * gymnasium.mean()
    assert abs(vector.std() - gymnasium.std()) < 0.02 * gymnasium.std()
    # The share of pixels at each grey level: the same picture of a court, paddles and ball.
    shares = [
        np.bincount(f.astype(np.int64).ravel(), minlength=256) / f.size for f in (vector, gymnasium)
    ]
    assert 0.5 * np.abs(shares[0] - shares[1]).sum() < 0.01


def test_the_run_says_how_its_workers_step_the_games() -> None:
    assert "1 emulator thread each" in atari_path(EnvRecipe("PongNoFrameskip-v4"), 16, workers=64)
    # Pong-v4 skips 2 to 4 frames at random, which the vector env cannot do.
    assert "gymnasium's AtariPreprocessing" in atari_path(EnvRecipe("Pong-v4"), 8, workers=2)
    assert atari_path(EnvRecipe("CartPole-v1"), 1, workers=2) is None
    capped = EnvRecipe("PongNoFrameskip-v4", max_episode_steps=1000)
    assert "with env kwargs, wrappers or an episode cap" in atari_path(capped, 8, workers=2)
    assert isinstance(make_env_batch(capped, describe_env(capped), 2, 2, "test"), GymEnvBatch)
    pong = EnvRecipe("Pong-v4")
    batch = make_env_batch(pong, describe_env(pong), 2, workers=2, process_name="test")
    assert isinstance(batch, GymEnvBatch)
    batch.close()


def test_removed_ids_name_their_replacement() -> None:
    with pytest.raises(UsageError, match=r"PongNoFrameskip-v4 .* or ALE/Pong-v5"):
        describe_env("PongDeterministic-v4")


def test_atari_ids_without_a_preset_get_the_atari_preset() -> None:
    assert find_preset("PongNoFrameskip-v4").name == "pong.toml"
    assert find_preset("ALE/Breakout-v5").name == "atari.toml"
    assert find_preset("SpaceInvadersNoFrameskip-v4").name == "atari.toml"
    assert find_preset("Acrobot-v1") is None


@pytest.mark.parametrize(
    ("frame_size", "conv_channels", "features"), [(42, 32, 288), (42, 16, 144), (84, 32, 256)]
)
def test_conv_encoders_take_uint8_frames(
    frame_size: int, conv_channels: int, features: int
) -> None:
    model = ActorCritic(
        (frame_size, frame_size), 6, frames=True, hidden_size=32, conv_channels=conv_channels
    )
    assert model.encoder.output_size == features
    frames = torch.randint(0, 256, (3, frame_size, frame_size), dtype=torch.uint8)
    logits, values, _ = model(frames, model.initial_state(3))
    assert logits.shape == (3, 6) and values.shape == (3,)
    # Frames are standardised inside the model: what the layers see does not depend on the
    # game's brightness or contrast, and a flat frame becomes all zeros.
    dim = torch.randint(0, 100, (3, frame_size, frame_size), dtype=torch.uint8)
    bright = dim * 2 + 50
    torch.testing.assert_close(model.encoder(bright), model.encoder(dim))
    pixels = dim.float().flatten(1)
    by_hand = (pixels - pixels.mean(1, keepdim=True)) / pixels.std(1, keepdim=True)
    torch.testing.assert_close(
        model.encoder(dim), model.encoder.layers(by_hand.view(3, 1, frame_size, frame_size))
    )
    flat = torch.full((1, frame_size, frame_size), 87, dtype=torch.uint8)
    torch.testing.assert_close(
        model.encoder(flat), model.encoder.layers(torch.zeros(1, 1, frame_size, frame_size))
    )


@pytest.mark.parametrize("frame_size", [42, 84])
def test_a_bfloat16_encoder_computes_close_to_float32_and_keeps_float32_weights(
    frame_size: int,
) -> None:
    torch.manual_seed(0)
    exact = ActorCritic((frame_size, frame_size), 6, frames=True, hidden_size=32)
    rounded = ActorCritic(
        (frame_size, frame_size), 6, frames=True, hidden_size=32, bfloat16_frames=True
    )
    rounded.load_state_dict(exact.state_dict())  # one checkpoint serves both
    frames = torch.randint(0, 256, (8, frame_size, frame_size), dtype=torch.uint8)
    gradients = []
    features = []
    for model in (exact, rounded):
        out = model.encoder(frames)
        assert out.dtype == torch.float32
        out.square().mean().backward()
        features.append(out.detach())
        assert all(p.dtype == p.grad.dtype == torch.float32 for p in model.encoder.parameters())
        gradients.append(torch.cat([p.grad.flatten() for p in model.encoder.parameters()]))
    assert not torch.equal(*features), "the bfloat16 encoder computed in float32"
    # bfloat16 keeps 8 significant bits: about 0.4 % per number, a little more after
    # four layers; an error in the layers would be of the order of the features.
    assert (features[1] - features[0]).norm() < 0.02 * features[0].norm()
    assert torch.cosine_similarity(*gradients, dim=0) > 0.99


def test_the_conv_activation_is_a_setting_the_weights_alone_do_not_carry() -> None:
    torch.manual_seed(0)
    elu = ActorCritic((42, 42), 6, frames=True, hidden_size=32)
    relu = ActorCritic((42, 42), 6, frames=True, hidden_size=32, conv_activation="relu")
    assert [type(m) for m in relu.encoder.layers[1::2]] == [nn.ReLU] * 4
    assert [type(m) for m in elu.encoder.layers[1::2]] == [nn.ELU] * 4
    relu.load_state_dict(elu.state_dict())  # same parameter names and shapes
    frames = torch.randint(0, 256, (4, 42, 42), dtype=torch.uint8)
    assert not torch.allclose(relu.encoder(frames), elu.encoder(frames))
    # So it lives in the config, which checkpoints keep, and --resume cannot change it.
    assert "conv_activation" in model_settings()
    config = TrainConfig(env="PongNoFrameskip-v4", conv_activation="relu")
    saved = TrainConfig.from_dict(config.to_dict())
    model = build_model(saved, describe_env(EnvRecipe.of(saved)))
    assert isinstance(model.encoder.layers[1], nn.ReLU)


def test_precision_auto_takes_bfloat16_where_the_cpu_has_it() -> None:
    assert bfloat16_frames("bfloat16") and not bfloat16_frames("float32")
    assert bfloat16_frames("auto") == native_bfloat16()
    config = TrainConfig(env="PongNoFrameskip-v4", precision="float32")
    model = build_model(config, describe_env(EnvRecipe.of(config)))
    assert not model.encoder.in_bfloat16


def make_worker(**settings) -> Worker:
    # The Atari presets' rollout: one game per worker here, rewards as the game gives them.
    config = TrainConfig(
        workers=0, hidden_size=32, t_max=20, envs_per_worker=1, lstm=True, scale_rewards=False,
        **settings,
    )  # fmt: skip
    shared = make_shared(config, lr=1e-4)
    return Worker(0, config, shared)


def test_learning_uses_clipped_rewards_while_the_logged_score_is_real() -> None:
    worker = make_worker(env="SpaceInvadersNoFrameskip-v4", clip_rewards=True)
    clipped_sum = 0.0
    for _ in range(2000):
        rollout = worker.collect_rollout()
        assert set(rollout.rewards.flatten().tolist()) <= {-1.0, 0.0, 1.0}
        if rollout.episodes:
            (end,) = np.flatnonzero(rollout.episode_end[:, 0])
            clipped_sum += float(rollout.rewards[: end + 1, 0].sum())
            break
        clipped_sum += float(rollout.rewards.sum())
    worker.close()
    assert rollout.episodes, "no episode ended within 40,000 steps"
    # Space Invaders pays 5 to 30 points per alien: the real score is a multiple of 5 and
    # at least 5 times the number of rewarding steps the learner saw.
    (episode,) = rollout.episodes
    assert episode.score % 5 == 0
    assert episode.score >= 5 * clipped_sum > 0


def test_a_lost_life_is_terminal_for_learning_but_does_not_end_the_game() -> None:
    worker = make_worker(env="BreakoutNoFrameskip-v4", life_loss_terminal=True)
    steps, terminals = 0, 0
    for _ in range(2000):
        rollout = worker.collect_rollout()
        if rollout.episodes:
            (end,) = np.flatnonzero(rollout.episode_end[:, 0])
            steps += end + 1
            terminals += int(rollout.terminal[: end + 1, 0].sum())
            break
        steps += len(rollout)
        terminals += int(rollout.terminal.sum())
    worker.close()
    assert rollout.episodes
    # Breakout has 5 lives: 5 terminals for learning, one game (no episode record before).
    assert terminals == 5
    assert rollout.episodes[0].length == steps


def test_evaluation_episodes_are_capped() -> None:
    env = make_env("BreakoutNoFrameskip-v4")
    model = ActorCritic((42, 42), int(env.action_space.n), frames=True, hidden_size=32)
    profile = describe_env("BreakoutNoFrameskip-v4")
    scores = play_episodes(model, [env], profile, episodes=2, seed=0, greedy=True, max_steps=60)
    env.close()
    # A Breakout game lasts five lost balls, far more than 60 steps.
    assert scores.lengths == [60, 60]


def noop_game(env: gym.Env, max_steps: int) -> tuple[int, int]:
    """Agent steps and lives left when an agent that only ever plays NOOP stops."""
    _, info = env.reset(seed=0)
    lives = int(info["lives"])
    for step in range(1, max_steps + 1):
        _, _, terminated, truncated, info = env.step(0)
        lives = int(info["lives"])
        if terminated or truncated:
            return step, lives
    return max_steps, lives


def test_evaluation_presses_fire_when_a_breakout_life_starts() -> None:
    """Without FIRE the ball never launches: a NOOP agent's game never ends. The
    evaluator's envs launch it at the start and after each lost ball."""
    (evaluation_env,) = evaluation_envs("BreakoutNoFrameskip-v4", 1, "test")
    training_env = make_env("BreakoutNoFrameskip-v4")
    try:
        assert noop_game(training_env, 3000) == (3000, 5)
        steps, lives = noop_game(evaluation_env, 3000)
    finally:
        evaluation_env.close()
        training_env.close()
    assert steps < 3000 and lives == 0


def test_games_that_start_without_fire_are_left_alone() -> None:
    env = make_env("ALE/Freeway-v5", fire_at_life_start=True)  # actions: NOOP, UP, DOWN
    try:
        assert not isinstance(env.env, FireAtLifeStart)
    finally:
        env.close()


@pytest.mark.slow
def test_two_workers_train_on_pong_through_the_command(cli, tmp_path: Path) -> None:
    result = cli.run(
        "a3c-train",
        "--env",
        "PongNoFrameskip-v4",
        "--workers",
        "2",
        "--total-steps",
        "1500",
        "--eval-interval",
        "1000",
        "--eval-episodes",
        "1",
        "--eval-max-steps",
        "200",
        "--run-dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "16 games per worker in ale-py's AtariVectorEnv" in result.stdout
    arithmetic = "bfloat16" if native_bfloat16() else "float32"
    assert f"frame encoder in {arithmetic} (--precision auto)" in result.stdout
    run = only_run(tmp_path)
    evals = read_csv(run / "eval.csv")
    assert evals and all(float(row["mean_length"]) <= 200 for row in evals)
    # best.pt holds the first evaluation that scored the best mean; a3c-eval replays it.
    best = max(evals, key=lambda row: float(row["mean"]))
    replay = cli.run("a3c-eval", str(run), "--json", timeout=300)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["mean"] == float(best["mean"])
    assert (run / "checkpoints" / "latest.pt").is_file()
    assert "PongNoFrameskip-v4" in (run / "config.toml").read_text()
    # The preset's activation travels with the weights, which cannot tell it apart.
    assert load_checkpoint(run / "checkpoints" / "latest.pt")["config"]["conv_activation"] == "relu"
