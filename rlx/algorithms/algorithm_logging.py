"""Where an Algorithm's outputs go: its result logger, its trial directory (`logdir`) and the
episode videos `render_env` records there.

The logger is created on first use, so building an Algorithm alone writes no files.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlx.loggers.creation import create_result_logger, results_root, trial_dir_name
from rlx.utils.errors import ConfigError

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm


def result_logger(algo: "Algorithm") -> Any:
    """`algo`'s result logger, created (from its config and logger_creator) on first use."""
    if algo._result_logger is None:
        algo._result_logger = create_result_logger(algo.config, type(algo).__name__, algo._logger_creator)
        logdir = getattr(algo._result_logger, "logdir", None)
        if algo._logdir is None and logdir is not None:
            # Kept after stop() closes the logger: algo.logdir still names this trial.
            algo._logdir = Path(str(logdir))
    return algo._result_logger


def trial_logdir(algo: "Algorithm") -> str:
    """`algo`'s trial directory: its result logger's, or (for a logger that writes no files, such
    as NoopLogger) a new one under the results root; created on first use."""
    if algo._logdir is None:
        logdir = getattr(result_logger(algo), "logdir", None)
        if logdir is None:  # a logger that writes no files still needs a home for checkpoints
            logdir = results_root() / trial_dir_name(type(algo).__name__, algo.config.env)
        algo._logdir = Path(str(logdir))
        algo._logdir.mkdir(parents=True, exist_ok=True)
    return str(algo._logdir)


def close_result_logger(algo: "Algorithm") -> None:
    """Close `algo`'s result logger, if one was created (a new one is made on next use)."""
    logger = getattr(algo, "_result_logger", None)
    if logger is not None:
        algo._result_logger = None
        logger.close()


def start_video_recording(algo: "Algorithm") -> None:
    """render_env (or the old `monitor`): record episode videos of one training runner, the
    local one or, with remote runners, runner 1, into `<logdir>/videos`."""
    video_dir = os.path.join(algo.logdir, "videos")
    record_on = 0 if algo.config.num_env_runners == 0 else 1

    def start(runner: Any) -> None:
        if runner.worker_index != record_on:
            return
        method = getattr(runner, "start_video_recording", None)
        if method is None:
            raise ConfigError(
                f"render_env=True, but the EnvRunner class {type(runner).__name__} has no "
                "start_video_recording(video_dir) method; use SingleAgentEnvRunner or add one."
            )
        method(video_dir)

    algo.env_runner_group.foreach_env_runner(start)
