"""Action distributions and continuous actions: scores, bounds, clipping, re-scoring."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import ActionRecorder, assert_loss_is_the_replayed_loss, make_shared
from torch.distributions import Categorical

from a3c.config import (
    DEFAULT_ENT_COEF,
    DEFAULT_LR,
    TrainConfig,
)
from a3c.envs import describe_env, make_env
from a3c.evaluator import play_episodes
from a3c.model import build_model
from a3c.policy import (
    MAX_STD,
    MIN_STD,
    CategoricalActions,
    GaussianActions,
    GaussianHead,
    beyond_bounds,
)
from a3c.profile import CONTINUOUS_ENT_COEF, VECTOR_ENT_COEF, VECTOR_LR
from a3c.worker import Worker


def test_gaussian_log_prob_and_entropy_by_hand() -> None:
    actions = GaussianActions(2)
    # mean (0, 1), std (1, 2); action (1, 1).
    params = torch.tensor([[0.0, 1.0, 1.0, 2.0]])
    scores = actions.score(params, torch.tensor([[1.0, 1.0]]))
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    by_hand = (-0.5 - half_log_2pi) + (0.0 - math.log(2.0) - half_log_2pi)
    assert scores.log_prob.item() == pytest.approx(by_hand, abs=1e-6)
    entropy = (0.5 + half_log_2pi) + (0.5 + half_log_2pi + math.log(2.0))
    assert scores.entropy.item() == pytest.approx(entropy, abs=1e-6)
    distribution = actions.distribution(params)
    assert distribution.log_prob(torch.tensor([[1.0, 1.0]])).item() == pytest.approx(by_hand)
    assert distribution.entropy().item() == pytest.approx(entropy)
    assert torch.equal(actions.greedy(params), torch.tensor([[0.0, 1.0]]))


def test_a_mean_past_the_bounds_is_penalised_and_pulled_back() -> None:
    """Inside [-1, 1] the penalty is 0; past it, the squared excess, with a gradient back."""
    actions = GaussianActions(3)
    mean = torch.tensor([[0.5, -1.0, 1.0], [1.5, -3.0, 0.0]], requires_grad=True)
    params = torch.cat([mean, torch.ones(2, 3)], -1)
    scores = actions.score(params, torch.zeros(2, 3))
    torch.testing.assert_close(scores.beyond_bounds, torch.tensor([0.0, 0.5**2 + 2.0**2]))
    scores.beyond_bounds.sum().backward()
    assert mean.grad is not None
    torch.testing.assert_close(mean.grad, torch.tensor([[0.0, 0.0, 0.0], [1.0, -4.0, 0.0]]))
    torch.testing.assert_close(beyond_bounds(torch.tensor([2.0])), torch.tensor(1.0))
    discrete = CategoricalActions().score(torch.zeros(2, 4), torch.tensor([0, 3]))
    assert discrete.beyond_bounds.item() == 0.0


@pytest.mark.parametrize("kind", ["state", "learned"])
def test_the_gaussian_std_stays_between_its_floor_and_ceiling(kind: str) -> None:
    """However far training pushes the std, exploration keeps MIN_STD and never passes
    MAX_STD; an untrained head starts at 0.9."""
    std_layer = torch.nn.Linear(4, 2) if kind == "state" else None
    if std_layer is not None:
        torch.nn.init.zeros_(std_layer.bias)  # as the model builds it
    head = GaussianHead(torch.nn.Linear(4, 2), 2, kind, std_layer)
    hidden = torch.zeros(3, 4)
    torch.testing.assert_close(head(hidden)[:, 2:], torch.full((3, 2), 0.905), atol=1e-3, rtol=0)
    for logit, std in ((-100.0, MIN_STD), (100.0, MAX_STD)):
        with torch.no_grad():
            if std_layer is not None:
                std_layer.bias.fill_(logit)
            else:
                head.std_logit.fill_(logit)
        torch.testing.assert_close(head(hidden)[:, 2:], torch.full((3, 2), std))


def test_gaussian_samples_follow_mean_and_std() -> None:
    actions = GaussianActions(2)
    params = torch.tensor([[3.0, -1.0, 0.5, 2.0]]).expand(20_000, 4)
    samples = actions.sample(params, torch.Generator().manual_seed(0))
    assert samples.shape == (20_000, 2)
    torch.testing.assert_close(samples.mean(0), torch.tensor([3.0, -1.0]), atol=0.05, rtol=0)
    torch.testing.assert_close(samples.std(0), torch.tensor([0.5, 2.0]), atol=0.05, rtol=0)


def test_categorical_scores_match_torch() -> None:
    logits = torch.randn(6, 4)
    taken = torch.tensor([0, 1, 2, 3, 0, 1])
    scores = CategoricalActions().score(logits, taken)
    reference = Categorical(logits=logits)
    torch.testing.assert_close(scores.log_prob, reference.log_prob(taken))
    torch.testing.assert_close(scores.entropy, reference.entropy())


class BoundsEnv(gym.Env):
    """Remembers the actions it received; a Box of shape (2, 1) with uneven bounds."""

    def __init__(self, render_mode: str | None = None) -> None:
        self.action_space = gym.spaces.Box(
            np.array([[0.0], [10.0]], np.float32), np.array([[1.0], [20.0]], np.float32)
        )
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.received: list[np.ndarray] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.received.append(np.array(action))
        ended = len(self.received) % 7 == 0
        return np.zeros(3, np.float32), -float(np.sum(action)), ended, False, {}


gym.register("a3c-test/Bounds-v0", BoundsEnv)


def test_actions_map_onto_the_bounds_and_are_clipped_only_for_the_env() -> None:
    info = describe_env("a3c-test/Bounds-v0")
    assert info.n_actions == 2 and info.action_shape == (2, 1)
    sent = info.env_action(np.array([0.0, 0.5], np.float32))
    assert sent.shape == (2, 1) and sent.dtype == np.float32
    np.testing.assert_allclose(sent.ravel(), [0.5, 17.5])
    np.testing.assert_allclose(info.env_action(np.array([-3.0, 9.0])).ravel(), [0.0, 20.0])
    pendulum = describe_env("Pendulum-v1")
    np.testing.assert_allclose(pendulum.env_action(np.array([0.5])), [1.0])
    np.testing.assert_allclose(pendulum.env_action(np.array([-7.0])), [-2.0])

    # A worker: the rollout keeps the sampled actions, the env gets them mapped and clipped.
    config = TrainConfig(env="a3c-test/Bounds-v0", workers=0, t_max=40, envs_per_worker=1)
    worker = Worker(0, config, make_shared(config))
    rollout = worker.collect_rollout()
    env = worker.envs.envs[0].unwrapped
    worker.close()
    assert rollout.actions.shape == (40, 1, 2) and rollout.actions.dtype == np.float32
    assert (np.abs(rollout.actions) > 1).any(), "std 0.9: some samples leave [-1, 1]"
    received = np.stack(env.received).reshape(40, 2)
    assert received[:, 0].min() >= 0 and received[:, 0].max() <= 1
    assert received[:, 1].min() >= 10 and received[:, 1].max() <= 20
    for action, got in zip(rollout.actions[:, 0], received, strict=True):
        np.testing.assert_allclose(info.env_action(action).ravel(), got)


@pytest.mark.parametrize(
    ("policy_std", "lstm", "noisy"), [("state", True, False), ("learned", False, True)]
)
def test_gaussian_rollout_is_scored_as_a_step_by_step_replay(
    policy_std: str, lstm: bool, noisy: bool
) -> None:
    torch.manual_seed(0)
    config = TrainConfig(
        env="InvertedPendulum-v5" if _has_mujoco() else "Pendulum-v1",
        workers=0,
        t_max=25,
        envs_per_worker=2,
        lstm=lstm,
        policy_std=policy_std,
        noisy=noisy,
    )
    worker = Worker(0, config, make_shared(config))
    worker.envs.envs = [
        ActionRecorder(env, worker.obs[i]) for i, env in enumerate(worker.envs.envs)
    ]
    rollout = worker.collect_rollout()
    worker.close()
    gradients, _ = assert_loss_is_the_replayed_loss(worker, rollout)
    spread = "policy.std_logit" if policy_std == "learned" else "policy.std.weight"
    assert gradients[spread].abs().sum() > 0


def _has_mujoco() -> bool:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def test_greedy_continuous_evaluation_plays_the_mean_and_repeats() -> None:
    config = TrainConfig(env="Pendulum-v1")
    env = make_env(config.env)
    profile = describe_env(config.env)
    model = build_model(config, profile)
    first = play_episodes(model, [env], profile, 2, seed=5, greedy=True, max_steps=200)
    again = play_episodes(model, [env], profile, 2, seed=5, greedy=True, max_steps=200)
    sampled = play_episodes(model, [env], profile, 2, seed=5, greedy=False, max_steps=200)
    env.close()
    assert first.scores == again.scores
    assert sampled.scores != first.scores


def test_entropy_bonus_and_learning_rate_follow_the_spaces_unless_set() -> None:
    pendulum, cartpole, taxi, pong = (
        describe_env(env_id)
        for env_id in ("Pendulum-v1", "CartPole-v1", "Taxi-v4", "PongNoFrameskip-v4")
    )
    continuous = pendulum.fill_defaults(TrainConfig())
    assert (continuous.entropy_bonus, continuous.lr) == (CONTINUOUS_ENT_COEF, DEFAULT_LR)
    vector = cartpole.fill_defaults(TrainConfig())
    assert (vector.entropy_bonus, vector.lr) == (VECTOR_ENT_COEF, VECTOR_LR)
    for one_hot_or_frames in (taxi.fill_defaults(TrainConfig()), pong.fill_defaults(TrainConfig())):
        assert (one_hot_or_frames.entropy_bonus, one_hot_or_frames.lr) == (
            DEFAULT_ENT_COEF,
            DEFAULT_LR,
        )
    chosen = TrainConfig(ent_coef=0.2, lr=1e-3)
    for profile in (pendulum, cartpole, taxi, pong):
        filled = profile.fill_defaults(chosen)
        assert (filled.entropy_bonus, filled.lr) == (0.2, 1e-3)
    assert pendulum.fill_defaults(TrainConfig(noisy=True)).entropy_bonus == 0.0
    assert taxi.fill_defaults(TrainConfig(noisy=True)).entropy_bonus == 0.0


@pytest.mark.parametrize(
    ("env_id", "dims"),
    [("LunarLanderContinuous-v3", 2), ("BipedalWalker-v3", 4), ("HalfCheetah-v5", 6)],
)
def test_box2d_and_mujoco_continuous_ids_train(env_id: str, dims: int) -> None:
    """The box2d and mujoco extras (both in dev): a worker steps these envs and updates."""
    config = TrainConfig(env=env_id, workers=0, t_max=5, envs_per_worker=2)
    assert describe_env(env_id).n_actions == dims
    shared = make_shared(config)
    before = [p.detach().clone() for p in shared.model.parameters()]
    worker = Worker(0, config, shared)
    steps = worker.train_once()
    worker.close()
    assert steps == 10
    assert any(
        not torch.equal(b, p) for b, p in zip(before, shared.model.parameters(), strict=True)
    )
