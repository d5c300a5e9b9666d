"""The Python API: `train`, `evaluate` and `load_agent`, the functions the commands call too.

    import a3c

    result = a3c.train(env="CartPole-v1", workers=2, total_steps=100_000)
    agent = a3c.load_agent(result.run_dir)
    print(a3c.evaluate(result.run_dir, episodes=10)["mean"])

Training starts worker processes from a fork server: in a script, call `train` under
``if __name__ == "__main__":``, and register your own environments in a module that you
name as ``module:Id`` (docs/python.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from a3c.config import TrainConfig

if TYPE_CHECKING:
    from a3c.trainer import TrainResult


def train(
    config: TrainConfig | None = None,
    *,
    resume: str | Path | None = None,
    config_file: str | Path | None = None,
    preset: bool = True,
    quiet: bool = False,
    **settings: Any,
) -> TrainResult:
    """Train as `a3c-train` does and return the run's folder, steps and best evaluation.

    Settings are layered as on the command line: the built-in defaults, then a preset
    (`config_file`, else the shipped one for the env unless `preset=False`), then
    `settings`, named as `TrainConfig`'s fields (``env_kwargs={"is_slippery": False}``,
    ``wrappers=["minigrid.wrappers:ImgObsWrapper"]``). A `TrainConfig` given instead is
    used as it is, with `settings` on top. `resume` continues a checkpoint or a run folder
    with its saved settings and `settings` on top. Raises `UsageError` for bad input and
    `TrainingFailed` when training cannot go on.
    """
    from a3c.checkpoint import load_checkpoint, resolve_checkpoint_path
    from a3c.options import layered_config, resumed_config
    from a3c.supervisor import stop_helper_processes
    from a3c.trainer import train as run

    checkpoint, resume_from = None, None
    if resume is not None:
        resume_from = resolve_checkpoint_path(resume, prefer="latest")
        checkpoint = load_checkpoint(resume_from)
        config = resumed_config(checkpoint["config"], settings, config_file, not preset)
    elif config is not None:
        config = config.replace(settings, source="settings").validate()
    else:
        config, preset_file = layered_config(settings, config_file, not preset)
        if preset_file is not None and not quiet:
            print(f"a3c: settings from {preset_file}", flush=True)
    try:
        return run(config, quiet=quiet, resume=checkpoint, resume_from=resume_from)
    finally:
        stop_helper_processes()
