"""TrainConfig: one source for the parser, presets, config.toml and checkpoints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from a3c.config import TrainConfig
from a3c.errors import UsageError
from a3c.options import build_parser, config_from_args
from a3c.presets import find_preset, load_toml, to_toml
from a3c.profile import FAMILIES

REPO = Path(__file__).resolve().parent.parent


def parse(*argv: str) -> TrainConfig:
    return config_from_args(build_parser().parse_args(list(argv)))[0]


def test_every_field_has_a_flag_and_help() -> None:
    parser = build_parser()
    help_text = parser.format_help()
    flags = {action.dest: action.option_strings[0] for action in parser._actions}
    for f in dataclasses.fields(TrainConfig):
        assert flags[f.name] in help_text  # --wrapper, one per wrapper, serves `wrappers`
        assert f.metadata["help"]


def test_defaults_without_a_preset() -> None:
    config = parse("--env", "Acrobot-v1")
    assert config == TrainConfig(env="Acrobot-v1")


def test_env_alone_picks_the_shipped_preset() -> None:
    preset = find_preset("CartPole-v1")
    assert preset is not None and preset.name == "cartpole.toml"
    config, used = config_from_args(build_parser().parse_args(["--env", "CartPole-v1"]))
    assert used == preset
    assert config == TrainConfig().replace(load_toml(preset))


def test_noisy_picks_the_noisy_preset_where_there_is_one() -> None:
    config, used = config_from_args(build_parser().parse_args(["--env", "CartPole-v1", "--noisy"]))
    assert used is not None and used.name == "cartpole-noisy.toml"
    assert config.noisy and config.ent_coef is None and config.entropy_bonus == 0.0
    assert find_preset("PongNoFrameskip-v4", noisy=True).name == "pong-noisy.toml"
    assert find_preset("PongNoFrameskip-v4").name == "pong.toml"
    # No noisy preset for the env: its plain preset, with the flag on top.
    assert find_preset("BreakoutNoFrameskip-v4", noisy=True).name == "breakout.toml"
    assert find_preset("Acrobot-v1", noisy=True) is None
    tuned, _ = config_from_args(
        build_parser().parse_args(["--env", "CartPole-v1", "--noisy", "--ent-coef", "0.01"])
    )
    assert tuned.entropy_bonus == 0.01


def test_flags_override_the_preset_and_booleans_negate() -> None:
    preset = load_toml(REPO / "configs" / "cartpole.toml")
    config = parse("--env", "CartPole-v1", "--lr", "0.5", "--no-lstm", "--lr-decay")
    assert config.lr == 0.5
    assert config.lstm is False and config.lr_decay is True
    assert config.t_max == preset.get("t_max", TrainConfig().t_max)


def test_config_file_and_flags(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('env = "Acrobot-v1"\nt_max = 7\ngamma = 1\n')
    config = parse("--config", str(path), "--t-max", "9")
    assert (config.env, config.t_max, config.gamma) == ("Acrobot-v1", 9, 1.0)


def test_toml_round_trip(tmp_path: Path) -> None:
    config = TrainConfig(env="Acrobot-v1", lr=3e-4, lstm=False, target_score=-100.0, workers=3)
    path = tmp_path / "config.toml"
    path.write_text(to_toml(config))
    assert TrainConfig.from_dict(load_toml(path)) == config


def test_a_config_saved_before_conv_channels_existed_gets_pytorch_a3c_width() -> None:
    # Checkpoints written before the setting existed hold 32-channel conv weights.
    saved = TrainConfig(env="PongNoFrameskip-v4", conv_channels=16).to_dict()
    del saved["conv_channels"]
    assert TrainConfig.from_dict(saved).conv_channels == 32


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"learning_rate": 0.1}, "unknown setting 'learning_rate'"),
        ({"t_maxx": 5}, "did you mean t_max"),
        ({"t_max": 2.5}, "t_max must be int"),
        ({"lstm": "yes"}, "lstm must be bool"),
        ({"lr": True}, "lr must be float"),
    ],
)
def test_bad_settings_are_named(values: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TrainConfig.from_dict(values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"workers": -1}, "--workers must be >= 0"),
        ({"total_steps": 0}, "--total-steps must be >= 1"),
        ({"t_max": 0}, "--t-max must be >= 1"),
        ({"lr": 0.0}, "--lr must be > 0"),
        ({"lr": -1e-3}, "--lr must be > 0"),
        ({"gamma": 1.5}, "--gamma must be <= 1"),
        ({"eval_episodes": 0}, "--eval-episodes must be >= 1"),
        ({"eval_interval": 0}, "--eval-interval must be >= 1"),
        ({"advantage": "td"}, "--advantage must be one of gae, nstep"),
        ({"lr": float("nan")}, "--lr must be a finite number"),
        ({"sync_interval": 0.0}, "--sync-interval must be > 0"),
        ({"sync_interval": 200.0}, "--node-timeout .* must be longer than --sync-interval"),
    ],
)
def test_out_of_range_values_are_refused(values: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TrainConfig.from_dict(values).validate()


def test_missing_and_broken_config_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config file not found"):
        load_toml(tmp_path / "nope.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("lr = = 3\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_toml(broken)


def test_every_shipped_preset_is_valid() -> None:
    presets = sorted((REPO / "configs").glob("*.toml"))
    assert presets
    for path in presets:
        values = load_toml(path)
        config = TrainConfig.from_dict(values, source=str(path)).validate()
        if path.name in {family.preset for family in FAMILIES}:
            assert "env" not in values, f"{path.name} must fit any environment of its family"
        else:
            assert find_preset(config.env, config.noisy) == path
