"""Bad input through the real commands: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import hide_packages

from a3c.config import TrainConfig


def assert_one_line_usage_error(result, expected: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env", "CartPol-v1"], "unknown environment 'CartPol-v1'; did you mean CartPole-v1"),
        (["--workers", "-1"], "--workers must be >= 0 (got -1)"),
        (["--workers", "two"], "argument --workers: invalid int value: 'two'"),
        (["--config", "/nonexistent/a3c.toml"], "config file not found: /nonexistent/a3c.toml"),
    ],
)
def test_train_refuses_bad_input(cli, tmp_path: Path, args: list[str], expected: str) -> None:
    result = cli.run("a3c-train", *args, "--run-dir", str(tmp_path), timeout=120)
    assert_one_line_usage_error(result, expected)
    assert not any(tmp_path.iterdir()), "no run folder may be created for bad input"


def test_train_refuses_unknown_config_key(cli, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('env = "CartPole-v1"\nlearning_rate = 0.1\n')
    result = cli.run("a3c-train", "--config", str(config), "--run-dir", str(tmp_path / "runs"))
    assert_one_line_usage_error(result, "unknown setting 'learning_rate'")


def test_help_is_grouped_by_topic(cli) -> None:
    result = cli.run("a3c-train", "--help")
    assert result.returncode == 0
    from a3c.fields import GROUPS

    positions = [result.stdout.index(f"\n{group}:\n") for group in GROUPS]
    assert positions == sorted(positions)
    for flag in ("--env", "--workers", "--total-steps", "--t-max", "--gae-lambda", "--no-lstm"):
        assert flag in result.stdout


@pytest.mark.parametrize("command", ["a3c-train", "a3c-eval", "a3c-plot"])
def test_every_command_prints_its_version(cli, command: str) -> None:
    from a3c import __version__

    result = cli.run(command, "--version", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{command} {__version__} (torch ")
    assert len(result.stdout.strip().splitlines()) == 1


def test_abbreviated_flags_are_refused(cli, tmp_path: Path) -> None:
    result = cli.run("a3c-train", "--total-step", "10", "--run-dir", str(tmp_path))
    assert_one_line_usage_error(result, "unrecognized arguments: --total-step")


@pytest.mark.parametrize(
    ("env_id", "hidden", "expected"),
    [
        # gymnasium's jax environments: no a3c extra has jax, so gymnasium's reason is named.
        ("phys2d/CartPole-v1", None, "needs a package that is not installed: No module named"),
        # mujoco is in the dev extra: a site hook makes it look uninstalled to the command.
        (
            "HalfCheetah-v5",
            "mujoco",
            "HalfCheetah-v5 needs gymnasium's mujoco packages: pip install 'a3c[mujoco]'",
        ),
    ],
)
def test_an_environment_whose_package_is_missing_is_refused(
    cli, tmp_path: Path, env_id: str, hidden: str | None, expected: str
) -> None:
    if hidden is not None:
        cli.env["PYTHONPATH"] = hide_packages(tmp_path / "hide", hidden)
    runs = tmp_path / "runs"
    result = cli.run("a3c-train", "--env", env_id, "--run-dir", str(runs), timeout=120)
    assert_one_line_usage_error(result, expected)
    assert not runs.exists() or not any(runs.iterdir())


def test_no_preset_uses_the_built_in_defaults(cli, tmp_path: Path) -> None:
    from a3c.options import build_parser, config_from_args

    config, preset = config_from_args(build_parser().parse_args(["--no-preset"]))
    assert preset is None and config == TrainConfig()
    result = cli.run("a3c-train", "--no-preset", "--config", "configs/cartpole.toml")
    assert_one_line_usage_error(result, "--config and --no-preset contradict each other")
