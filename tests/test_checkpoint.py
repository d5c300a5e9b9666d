"""Checkpoints: round trip, atomic writes, resume, a3c-eval, and every bad file refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from helpers import read_csv

from a3c.checkpoint import FORMAT_VERSION, build_checkpoint, load_checkpoint, save_checkpoint
from a3c.config import DEFAULT_ENT_COEF, TrainConfig
from a3c.envs import describe_env
from a3c.errors import UsageError
from a3c.model import ActorCritic
from a3c.optim import SharedAdam
from a3c.trainer import Trainer, train


def trained_pair() -> tuple[ActorCritic, SharedAdam]:
    torch.manual_seed(0)
    model = ActorCritic((4,), 2, hidden_size=16)
    optimizer = SharedAdam(model.parameters(), lr=1e-2)
    for _ in range(3):
        logits, value, _ = model(torch.randn(5, 4), model.initial_state(5))
        optimizer.zero_grad()
        (logits.sum() + value.sum()).backward()
        optimizer.step()
    return model, optimizer


# What a trainer saves for trained_pair's model: every default that depends on the
# environment's spaces filled in (4 features, 2 actions).
SAVED_CONFIG = describe_env("CartPole-v1").fill_defaults(TrainConfig(hidden_size=16))


def checkpoint_of(model, optimizer, step: int = 1234) -> dict:
    return build_checkpoint(
        model=model,
        optimizer=optimizer,
        config=SAVED_CONFIG,
        step=step,
        episodes=7,
        best_score=42.0,
        seconds=3.5,
    )


def test_round_trip_keeps_weights_and_optimizer_state(tmp_path: Path) -> None:
    model, optimizer = trained_pair()
    path = tmp_path / "latest.pt"
    save_checkpoint(checkpoint_of(model, optimizer), path)
    loaded = load_checkpoint(path)
    assert (loaded["step"], loaded["episodes"], loaded["best_score"]) == (1234, 7, 42.0)
    assert TrainConfig.from_dict(loaded["config"]) == SAVED_CONFIG

    fresh = ActorCritic((4,), 2, hidden_size=16)
    fresh.load_state_dict(loaded["model"])
    for a, b in zip(fresh.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    fresh_optimizer = SharedAdam(fresh.parameters(), lr=1e-2)
    fresh_optimizer.load_state_dict(loaded["optimizer"])
    fresh_optimizer.share_memory()
    for ours, theirs in zip(fresh.parameters(), model.parameters(), strict=True):
        for key, value in optimizer.state[theirs].items():
            assert torch.equal(fresh_optimizer.state[ours][key], value)
            assert fresh_optimizer.state[ours][key].is_shared()


def test_format_1_image_weights_are_refused_and_vector_weights_still_load(
    tmp_path: Path,
) -> None:
    # Format 1 scaled frames to [0, 1]; those conv weights would play blind on
    # standardised frames, while vector models did not change.
    vector, optimizer = trained_pair()
    old_vector = tmp_path / "old_cartpole.pt"
    torch.save({**checkpoint_of(vector, optimizer), "format_version": 1}, old_vector)
    assert load_checkpoint(old_vector)["step"] == 1234

    image = ActorCritic((42, 42), 6, frames=True, hidden_size=16)
    checkpoint = {**checkpoint_of(image, None), "format_version": 1}
    torch.save(checkpoint, tmp_path / "old_pong.pt")
    with pytest.raises(UsageError, match="frames scaled to \\[0, 1\\] \\(format 1\\)"):
        load_checkpoint(tmp_path / "old_pong.pt")
    save_checkpoint({**checkpoint, "format_version": FORMAT_VERSION}, tmp_path / "new.pt")
    assert load_checkpoint(tmp_path / "new.pt")["step"] == 1234


def test_a_failed_save_leaves_the_old_file_whole(tmp_path: Path) -> None:
    model, optimizer = trained_pair()
    path = tmp_path / "latest.pt"
    save_checkpoint(checkpoint_of(model, optimizer, step=1), path)
    broken = checkpoint_of(model, optimizer, step=2)
    broken["not picklable"] = lambda: None
    with pytest.raises(Exception, match="pickle"):
        save_checkpoint(broken, path)
    assert load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["latest.pt"], "no temporary file is left"


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    """A short serial CartPole run with checkpoints on disk."""
    config = TrainConfig(
        env="CartPole-v1",
        workers=0,
        total_steps=3000,
        eval_interval=1000,
        eval_episodes=3,
        lstm=False,
        lr=2e-3,
        t_max=10,
        lr_decay=True,
        normalize_obs=True,
        scale_rewards=True,
        checkpoint_interval=1000,
        run_dir=str(tmp_path_factory.mktemp("runs")),
    )
    return train(config, quiet=True).run_dir


def test_resume_continues_the_counter_schedule_and_logs(cartpole_run: Path) -> None:
    latest = cartpole_run / "checkpoints" / "latest.pt"
    saved = load_checkpoint(latest)
    saved_step = saved["step"]
    evals_before = read_csv(cartpole_run / "eval.csv")
    # Read now: the optimiser may take these very tensors when it loads them.
    saved_adam_steps = next(iter(saved["optimizer"]["state"].values()))["step"].item()
    config = TrainConfig.from_dict(saved["config"]).replace({"total_steps": 6000})

    trainer = Trainer(config, quiet=True, resume=saved, resume_from=latest)
    assert trainer.run_dir.path == cartpole_run
    assert trainer.shared.steps_done == saved_step
    first_update: dict[str, float] = {}

    def record(optimizer, args, kwargs) -> None:
        if not first_update:
            param = optimizer.param_groups[0]["params"][0]
            first_update["lr"] = optimizer.param_groups[0]["lr"]
            first_update["adam_steps"] = optimizer.state[param]["step"].item()

    trainer.shared.optimizer.register_step_pre_hook(record)
    result = trainer.run()

    # Optimiser state and learning-rate schedule pick up where they were.
    assert first_update["lr"] == pytest.approx(config.learning_rate_at(saved_step))
    assert first_update["adam_steps"] == saved_adam_steps
    # The counter never restarts, and the logs are appended to the same run folder.
    assert result.steps >= 6000
    evals = read_csv(cartpole_run / "eval.csv")
    assert evals[: len(evals_before)] == evals_before
    new_steps = [int(row["step"]) for row in evals[len(evals_before) :]]
    assert new_steps and min(new_steps) > saved_step
    seconds = [float(row["seconds"]) for row in evals]
    assert seconds == sorted(seconds), "wall time continues too"
    resumed = load_checkpoint(latest)
    assert resumed["step"] == result.steps
    # The running statistics went on from the saved ones: one worker with one environment
    # merges exactly one observation and one return per agent step.
    assert saved["model"]["obs_norm.count"].item() == saved_step
    assert resumed["model"]["obs_norm.count"].item() == result.steps
    assert resumed["model"]["return_norm.count"].item() == result.steps


def test_eval_is_reproducible_and_matches_the_logged_score(cli, cartpole_run: Path) -> None:
    best = cartpole_run / "checkpoints" / "best.pt"
    first = cli.run("a3c-eval", str(best), "--json", "--episodes", "3")
    again = cli.run("a3c-eval", str(best), "--json", "--episodes", "3")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == json.loads(again.stdout)
    checkpoint = load_checkpoint(best)
    assert json.loads(first.stdout)["mean"] == pytest.approx(checkpoint["best_score"])
    # The score above was played through these statistics, far from the identity that a
    # model without them would apply.
    assert (checkpoint["model"]["obs_norm.var"] - 1).abs().max() > 0.5
    text = cli.run("a3c-eval", str(cartpole_run), "--sample", "--seed", "5", "--episodes", "2")
    assert text.returncode == 0 and "score" in text.stdout and "sample" in text.stdout


def test_eval_records_a_video_of_the_games_it_scored(
    cli, cartpole_run: Path, tmp_path: Path
) -> None:
    import imageio.v2 as imageio

    video = tmp_path / "cartpole.mp4"
    args = ("a3c-eval", str(cartpole_run), "--episodes", "2", "--json", "--sample")
    result = cli.run(*args, "--video", str(video))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # The video replays the scored episodes: the same scores, one frame per reset and step.
    assert "video_scores" not in report
    assert report["scores"] == json.loads(cli.run(*args).stdout)["scores"]
    reader = imageio.get_reader(video)
    assert reader.count_frames() == sum(report["lengths"]) + 2
    reader.close()


def assert_refused(result, expected: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert expected in lines[0], lines[0]


class _CreatesAFile:
    """Unpickling this would call open(path, "w"): a stand-in for code in a pickle."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_bad_checkpoints_are_refused(cli, tmp_path: Path, cartpole_run: Path) -> None:
    # Through the command once: its UsageError is one line and exit code 2.
    assert_refused(cli.run("a3c-eval", str(tmp_path / "missing.pt")), "no such file or folder")

    def refused(path: Path, message: str) -> None:
        with pytest.raises(UsageError, match=message) as error:
            load_checkpoint(path)
        assert "\n" not in str(error.value)

    empty = tmp_path / "empty_run"
    empty.mkdir()
    refused(empty, "no checkpoint in")

    text = tmp_path / "notes.pt"
    text.write_text("this is not a checkpoint\n")
    refused(text, "is not a readable checkpoint")

    whole = (cartpole_run / "checkpoints" / "latest.pt").read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(whole[: len(whole) // 2])
    refused(truncated, "is not a readable checkpoint")

    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    refused(foreign, "is not an a3c checkpoint")

    newer = tmp_path / "newer.pt"
    checkpoint = load_checkpoint(cartpole_run / "checkpoints" / "latest.pt")
    torch.save({**checkpoint, "format_version": FORMAT_VERSION + 1}, newer)
    refused(newer, f"checkpoint format {FORMAT_VERSION + 1}")


def test_a_pickle_that_carries_code_is_refused_and_never_run(cli, tmp_path: Path) -> None:
    victim = tmp_path / "created_by_the_pickle.txt"
    crafted = tmp_path / "crafted.pt"
    torch.save({"format_version": 1, "payload": _CreatesAFile(victim)}, crafted)
    assert not victim.exists()
    for command in (("a3c-eval", str(crafted)), ("a3c-train", "--resume", str(crafted))):
        assert_refused(cli.run(*command), "was refused by the safe loader")
        assert not victim.exists(), f"{command[0]} ran code from the pickle"


def test_resume_refuses_to_change_the_model(cli, cartpole_run: Path) -> None:
    latest = str(cartpole_run / "checkpoints" / "latest.pt")
    assert_refused(
        cli.run("a3c-train", "--resume", latest, "--hidden-size", "64"),
        "--hidden-size cannot change on --resume",
    )
    assert_refused(
        cli.run("a3c-train", "--resume", latest, "--conv-channels", "16"),
        "--conv-channels cannot change on --resume",
    )
    assert_refused(
        cli.run("a3c-train", "--resume", latest, "--conv-activation", "relu"),
        "--conv-activation cannot change on --resume",
    )
    assert os.path.exists(latest)


def test_a_checkpoint_from_before_running_statistics_loads_without_them(tmp_path: Path) -> None:
    model, optimizer = trained_pair()
    checkpoint = checkpoint_of(model, optimizer)
    for name in ("normalize_obs", "scale_rewards"):
        del checkpoint["config"][name]
    save_checkpoint(checkpoint, tmp_path / "old.pt")
    config = TrainConfig.from_dict(load_checkpoint(tmp_path / "old.pt")["config"])
    assert not config.normalize_obs and not config.scale_rewards


def test_a_checkpoint_without_a_chosen_entropy_bonus_keeps_the_one_it_trained_with(
    tmp_path: Path,
) -> None:
    """Before trainers filled every default in, a saved ent_coef of None meant 0.05; vector
    observations now default to 0, and a resumed run must not switch."""
    model, optimizer = trained_pair()
    checkpoint = checkpoint_of(model, optimizer)
    checkpoint["config"]["ent_coef"] = None
    save_checkpoint(checkpoint, tmp_path / "old.pt")
    config = TrainConfig.from_dict(load_checkpoint(tmp_path / "old.pt")["config"])
    assert config.ent_coef == DEFAULT_ENT_COEF
    assert describe_env("CartPole-v1").fill_defaults(config).entropy_bonus == DEFAULT_ENT_COEF
