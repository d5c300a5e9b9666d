"""NoisyNet layers and their life in a worker: one noise sample per rollout, local to it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import ActionRecorder, assert_loss_is_the_replayed_loss, make_shared

from a3c.checkpoint import build_checkpoint, load_checkpoint, save_checkpoint
from a3c.config import TrainConfig
from a3c.envs import describe_env, make_env
from a3c.errors import UsageError
from a3c.evaluator import play_episodes
from a3c.model import build_model
from a3c.noisy import NoisyLinear
from a3c.worker import Worker


def test_independent_noise_initialisation_and_samples() -> None:
    torch.manual_seed(0)
    layer = NoisyLinear(300, 200, "independent")
    bound = math.sqrt(3 / 300)
    for mu in (layer.weight_mu, layer.bias_mu):
        assert mu.abs().max() <= bound
    # U[-b, b] has standard deviation b / sqrt(3).
    assert layer.weight_mu.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    assert torch.all(layer.weight_sigma == 0.017) and torch.all(layer.bias_sigma == 0.017)
    assert not layer.weight_epsilon.any(), "a new layer plays its mean weights"
    layer.sample_noise()
    epsilon = layer.weight_epsilon
    assert epsilon.mean().item() == pytest.approx(0.0, abs=0.01)
    assert epsilon.std().item() == pytest.approx(1.0, abs=0.01)
    # Independent: no structure across rows and columns.
    correlation = np.corrcoef(epsilon[0].numpy(), epsilon[1].numpy())[0, 1]
    assert abs(correlation) < 0.2


def test_factorised_noise_initialisation_and_samples() -> None:
    torch.manual_seed(0)
    layer = NoisyLinear(400, 50, "factorised")
    assert layer.weight_mu.abs().max() <= 1 / math.sqrt(400)
    assert layer.bias_mu.abs().max() <= 1 / math.sqrt(400)
    sigma = 0.5 / math.sqrt(400)
    assert torch.allclose(layer.weight_sigma, torch.full((50, 400), sigma))
    assert torch.allclose(layer.bias_sigma, torch.full((50,), sigma))
    layer.sample_noise()
    epsilon, bias = layer.weight_epsilon, layer.bias_epsilon
    # epsilon_ij = f(out_i) f(in_j) with f(x) = sgn(x) sqrt|x|: rank one, bias = f(out).
    assert torch.linalg.matrix_rank(epsilon).item() == 1
    noise_in = epsilon[0] / bias[0]
    torch.testing.assert_close(epsilon, torch.outer(bias, noise_in))
    # f(x)^2 = |x| for a standard Gaussian x: mean sqrt(2/pi).
    assert noise_in.square().mean().item() == pytest.approx(math.sqrt(2 / math.pi), rel=0.15)
    layer_with_sigma0 = NoisyLinear(400, 50, "factorised", sigma_init=0.1)
    assert layer_with_sigma0.weight_sigma[0, 0].item() == pytest.approx(0.1 / 20)


def test_forward_is_mu_plus_sigma_times_epsilon_and_mu_without_noise() -> None:
    torch.manual_seed(1)
    layer = NoisyLinear(5, 3, "independent", sigma_init=0.5)
    inputs = torch.randn(4, 5)
    mean = inputs @ layer.weight_mu.T + layer.bias_mu
    assert torch.equal(layer(inputs), mean)
    layer.sample_noise()
    weight = layer.weight_mu + layer.weight_sigma * layer.weight_epsilon
    bias = layer.bias_mu + layer.bias_sigma * layer.bias_epsilon
    torch.testing.assert_close(layer(inputs), inputs @ weight.T + bias)
    assert not torch.allclose(layer(inputs), mean)
    layer.remove_noise()
    assert torch.equal(layer(inputs), mean)


def test_noise_is_not_state_only_mu_and_sigma_are() -> None:
    config = TrainConfig(noisy=True, noisy_dense=True)
    model = build_model(config, describe_env("CartPole-v1"))
    keys = set(model.state_dict())
    assert {"policy.weight_mu", "policy.weight_sigma", "value.bias_sigma"} <= keys
    assert {"encoder.layer.weight_sigma", "dense.0.weight_sigma"} <= keys
    assert not any("epsilon" in key for key in keys)
    names = {name for name, _ in model.named_parameters()}
    assert not any("epsilon" in name for name in names)
    assert set(model.noise_sigmas()) == {"encoder", "core", "policy", "value"}
    plain = build_model(TrainConfig(noisy=True), describe_env("CartPole-v1"))
    assert set(plain.noise_sigmas()) == {"policy", "value"}


def noisy_config(**changes: object) -> TrainConfig:
    values = {"env": "CartPole-v1", "workers": 0, "t_max": 20, "envs_per_worker": 2}
    values |= {"noisy": True, "sigma_init": 0.5} | changes
    return TrainConfig.from_dict(values)


def epsilons(model: torch.nn.Module) -> list[torch.Tensor]:
    return [b.clone() for name, b in model.named_buffers() if "epsilon" in name]


@pytest.mark.parametrize(
    "changes",
    [
        {"lstm": False, "noisy_dense": True, "noise": "factorised"},
        {"lstm": True, "noise": "independent"},
    ],
)
def test_rollout_is_scored_with_the_noise_that_played_it(changes: dict[str, object]) -> None:
    """The loss and gradients, sigma's included, equal a step-by-step replay with the same
    epsilon; epsilon stays put through the rollout and changes after the update."""
    torch.manual_seed(0)
    config = noisy_config(**changes)
    worker = Worker(0, config, make_shared(config))
    worker.envs.envs = [
        ActionRecorder(env, worker.obs[i]) for i, env in enumerate(worker.envs.envs)
    ]
    model = worker.model
    played_with = epsilons(model)
    assert all(e.any() for e in played_with), "a worker starts with its own noise"
    rollout = worker.collect_rollout()
    assert all(torch.equal(a, b) for a, b in zip(epsilons(model), played_with, strict=True))
    for t, actions in enumerate(rollout.actions):
        assert all(r.steps[t][1] == a for r, a in zip(worker.envs.envs, actions, strict=True))
    gradients, reference = assert_loss_is_the_replayed_loss(worker, rollout)
    assert all(g.abs().sum() > 0 for name, g in gradients.items() if name.endswith("sigma"))

    # Replayed with other noise, the same rollout scores differently: the check above
    # would have caught a redraw between play and loss.
    model.sample_noise()
    assert not torch.allclose(worker.loss(rollout).total, reference)
    before = epsilons(worker.model)
    worker.train_once()
    worker.close()
    after = epsilons(worker.model)
    assert all(not torch.equal(a, b) for a, b in zip(after, before, strict=True))


def test_sigma_is_trained_in_the_shared_model_and_each_worker_keeps_its_noise() -> None:
    config = noisy_config(seed=3)
    shared = make_shared(config)
    first, second = Worker(0, config, shared), Worker(1, config, shared)
    sigma_before = shared.model.policy.weight_sigma.detach().clone()
    noise_first = epsilons(first.model)
    noise_second = epsilons(second.model)
    assert all(not torch.equal(a, b) for a, b in zip(noise_first, noise_second, strict=True))
    first.train_once()
    # Syncing the shared weights takes mu and sigma, never another model's epsilon.
    noise_second = epsilons(second.model)
    second.model.load_state_dict(shared.model.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(epsilons(second.model), noise_second, strict=True))
    second.train_once()
    first.close()
    second.close()
    assert not torch.equal(shared.model.policy.weight_sigma, sigma_before)
    assert not any(b.any() for name, b in shared.model.named_buffers() if "epsilon" in name)


def test_greedy_evaluation_without_noise_is_deterministic_and_with_noise_seeded() -> None:
    config = noisy_config(sigma_init=2.0)
    env = make_env(config.env)
    profile = describe_env(config.env)
    model = build_model(config, profile)
    model.sample_noise()  # as a worker's model would be: evaluation must drop it
    runs = [
        play_episodes(model, [env], profile, 3, seed=11, greedy=True, max_steps=500).scores
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    model.remove_noise()
    assert (
        play_episodes(model, [env], profile, 3, seed=11, greedy=True, max_steps=500).scores
        == runs[0]
    )
    noisy = [
        play_episodes(model, [env], profile, 5, seed=11, greedy=True, max_steps=500, noise=True)
        for _ in range(2)
    ]
    assert noisy[0].scores == noisy[1].scores
    # sigma 2 on the heads: sampled weights play differently from the mean ones.
    assert noisy[0].scores[:3] != runs[0]
    env.close()


def test_checkpoint_round_trip_keeps_sigma(tmp_path) -> None:
    config = noisy_config(noise="factorised", noisy_dense=True, lstm=False)
    shared = make_shared(config)
    worker = Worker(0, config, shared)
    for _ in range(3):
        worker.train_once()
    worker.close()
    path = tmp_path / "noisy.pt"
    save_checkpoint(
        build_checkpoint(
            model=shared.model,
            optimizer=shared.optimizer,
            config=config,
            step=shared.steps_done,
            episodes=0,
            best_score=None,
            seconds=1.0,
        ),
        path,
    )
    loaded = load_checkpoint(path)
    restored = build_model(TrainConfig.from_dict(loaded["config"]), describe_env(config.env))
    restored.load_state_dict(loaded["model"])
    for name, tensor in shared.model.state_dict().items():
        assert torch.equal(restored.state_dict()[name], tensor), name
    assert restored.noise_sigmas() == pytest.approx(shared.model.noise_sigmas())
    assert restored.noise_sigmas()["policy"] != pytest.approx(0.5 / math.sqrt(128))


def test_noise_settings_need_noisy_and_entropy_defaults_follow_it() -> None:
    assert TrainConfig().entropy_bonus == 0.05
    assert TrainConfig(noisy=True).entropy_bonus == 0.0
    assert TrainConfig(noisy=True, ent_coef=0.01).entropy_bonus == 0.01
    for changes in ({"noise": "factorised"}, {"eval_noise": True}, {"sigma_init": 0.1}):
        with pytest.raises(UsageError, match="add --noisy"):
            TrainConfig.from_dict(changes).validate()
    frames_into_lstm = TrainConfig(
        env="PongNoFrameskip-v4", lstm=True, noisy=True, noisy_dense=True
    )
    with pytest.raises(UsageError, match="no dense layer"):
        build_model(frames_into_lstm, describe_env("PongNoFrameskip-v4"))
