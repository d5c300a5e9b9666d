"""Environment factory: real gymnasium environments and clear refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from a3c.envs import EnvRecipe, describe_env, make_env
from a3c.errors import UsageError
from a3c.profile import FRAMES, ONE_HOT, VECTOR


def test_cartpole_observations_and_real_episode_scores() -> None:
    env = make_env("CartPole-v1")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,) and obs.dtype == np.float32
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(0)
        total += reward
        done = terminated or truncated
    assert info["episode"]["r"] == total
    env.close()


def test_describe_env() -> None:
    info = describe_env("CartPole-v1")
    assert info.observation_shape == (4,)
    assert info.n_actions == 2


def test_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(
        UsageError, match=r"unknown environment 'CartPol-v1'; did you mean CartPole"
    ):
        describe_env("CartPol-v1")


def test_unknown_id_without_close_match() -> None:
    package = r"\(one that a package registers: --env PACKAGE:ID imports it\)"
    with pytest.raises(UsageError, match=rf"^unknown environment 'zzzzzzzz' {package}$"):
        describe_env("zzzzzzzz")


TWO_ACTIONS = gym.spaces.Discrete(2)
THREE_FEATURES = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


class SpacesEnv(gym.Env):
    """A one-step env with the action and observation spaces a test asks for."""

    def __init__(
        self,
        action_space: gym.Space = TWO_ACTIONS,
        observation_space: gym.Space = THREE_FEATURES,
        render_mode: str | None = None,
    ) -> None:
        self.action_space = action_space
        self.observation_space = observation_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


REFUSED_ACTION_SPACES = {
    "MultiDiscrete": gym.spaces.MultiDiscrete([3, 2]),
    "MultiBinary": gym.spaces.MultiBinary(4),
    "Dict": gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    "Tuple": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))),
}
for _name, _space in REFUSED_ACTION_SPACES.items():
    gym.register(f"a3c-test/{_name}Actions-v0", SpacesEnv, kwargs={"action_space": _space})
TEXT = gym.spaces.Text(8)
gym.register("a3c-test/TextObservations-v0", SpacesEnv, kwargs={"observation_space": TEXT})
STRUCTURED = gym.spaces.Dict(
    {"cell": gym.spaces.MultiDiscrete([3, 4]), "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
)
gym.register("a3c-test/DictObservations-v0", SpacesEnv, kwargs={"observation_space": STRUCTURED})
ONE_CHANNEL = gym.spaces.Box(0, 255, (64, 48, 1), np.uint8)
gym.register("a3c-test/OneChannelImages-v0", SpacesEnv, kwargs={"observation_space": ONE_CHANNEL})


@pytest.mark.parametrize("kind", sorted(REFUSED_ACTION_SPACES))
def test_other_action_spaces_are_refused_in_one_line(kind: str) -> None:
    env_id = f"a3c-test/{kind}Actions-v0"
    with pytest.raises(
        UsageError, match=rf"^{env_id} has a {kind} action space; a3c supports Discrete and Box"
    ):
        describe_env(env_id)


def test_box_actions_are_described_with_their_bounds() -> None:
    info = describe_env("Pendulum-v1")
    assert info.continuous and info.n_actions == 1 and info.action_shape == (1,)
    assert info.action_low == (-2.0,) and info.action_high == (2.0,)
    assert not describe_env("CartPole-v1").continuous


@pytest.mark.parametrize(("env_id", "states"), [("Taxi-v4", 500), ("FrozenLake-v1", 16)])
def test_discrete_observations_become_one_hot_vectors(env_id: str, states: int) -> None:
    env = make_env(env_id)
    raw = env.unwrapped
    obs, _ = env.reset(seed=3)
    assert obs.shape == (states,) and obs.dtype == np.float32
    assert obs.sum() == 1.0 and obs[raw.s] == 1.0  # raw.s: the toy-text env's own state
    obs, *_ = env.step(1)
    assert obs.sum() == 1.0 and obs[raw.s] == 1.0
    info = describe_env(env_id)
    assert info.observation_shape == (states,) and info.observation == ONE_HOT
    env.close()


def test_vector_observations_are_flat_features_only() -> None:
    assert describe_env("CartPole-v1").observation == VECTOR
    assert describe_env("Pendulum-v1").observation == VECTOR
    assert describe_env("PongNoFrameskip-v4").observation == FRAMES


def test_blackjack_tuple_observations_become_one_hot_parts() -> None:
    env = make_env("Blackjack-v1")
    obs, _ = env.reset(seed=5)
    # The same deal without a3c's wrappers: the tuple that was one-hot encoded.
    player_sum, dealer_card, usable_ace = gym.make("Blackjack-v1").reset(seed=5)[0]
    assert obs.shape == (32 + 11 + 2,) and obs.dtype == np.float32
    assert sorted(np.flatnonzero(obs)) == [player_sum, 32 + dealer_card, 43 + usable_ace]
    info = describe_env("Blackjack-v1")
    assert info.observation == ONE_HOT  # the defaults of discrete states
    env.close()


def test_dict_observations_with_a_vector_part_are_flat_features() -> None:
    env = make_env("a3c-test/DictObservations-v0")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3 + 4 + 2,) and obs.dtype == np.float32
    assert obs[:7].sum() == 2.0  # "cell": a one-hot part per digit, then "pos" as it is
    assert describe_env("a3c-test/DictObservations-v0").observation == VECTOR
    env.close()


@pytest.mark.parametrize("frame_size", [42, 84])
def test_car_racing_images_become_square_grayscale_frames(frame_size: int) -> None:
    env = make_env(EnvRecipe("CarRacing-v3", frame_size=frame_size))
    obs, _ = env.reset(seed=2)
    for _ in range(60):  # past the opening zoom, onto the track
        obs, *_ = env.step(np.array([0.0, 0.5, 0.0], np.float32))
    assert obs.shape == (frame_size, frame_size) and obs.dtype == np.uint8
    assert obs.std() > 10  # a picture: track, grass and the car, not a blank frame
    info = describe_env(EnvRecipe("CarRacing-v3", frame_size=frame_size))
    assert info.observation_shape == (frame_size, frame_size) and info.continuous
    assert info.observation == FRAMES
    env.close()


def test_one_channel_images_are_resized_too() -> None:
    env = make_env("a3c-test/OneChannelImages-v0")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (42, 42) and obs.dtype == np.uint8
    env.close()


def test_other_observation_spaces_are_refused_in_one_line() -> None:
    with pytest.raises(
        UsageError, match=r"^a3c-test/TextObservations-v0 has Text observations .*Tuple or Dict"
    ):
        describe_env("a3c-test/TextObservations-v0")
