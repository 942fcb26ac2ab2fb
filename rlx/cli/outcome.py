"""What `rlx train` reports about a run (one trial or a sweep's): the run settings, the trial's
outcome, and the closing summary with the `rlx evaluate` command."""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rlx.cli.progress import format_seconds
from rlx.cli.stop import lookup

__all__ = ["DEFAULT_EXPERIMENT_NAME", "RETURN_KEY", "RunSettings", "TrialOutcome", "env_label", "evaluate_command",
           "first", "print_summary", "record"]

DEFAULT_EXPERIMENT_NAME = "default"
RETURN_KEY = "env_runners/episode_return_mean"


@dataclass
class RunSettings:
    """How to run experiments: command-line choices that override each experiment's own."""

    storage_path: str | None = None
    experiment_name: str | None = None
    checkpoint_freq: int | None = None
    checkpoint_at_end: bool | None = None
    keep_checkpoints_num: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str | None = None
    stop: dict[str, Any] | None = None
    env: Any = None
    algo: str | None = None
    config: dict[str, Any] | None = None
    seed: int | None = None
    verbose: int = 0
    restore: str | None = None
    live_progress: bool | None = None
    #: --wandb-project / --mlflow-uri: also log to a W&B project / an MLflow tracking server.
    wandb_project: str | None = None
    mlflow_uri: str | None = None


@dataclass
class TrialOutcome:
    """What a finished run reports: where it wrote, how far it got, why it stopped."""

    algo: str
    env: Any
    trial_dir: Path
    iterations: int = 0
    env_steps: int = 0
    time_s: float = 0.0
    final_return: float | None = None
    best_return: float | None = None
    best_iteration: int | None = None
    stop_reason: str = ""
    checkpoint: str | None = None
    checkpoints: list[str] = field(default_factory=list)
    #: With a checkpoint_score_attribute: the best-scoring checkpoint kept, its score and the key.
    best_checkpoint: str | None = None
    best_checkpoint_score: float | None = None
    checkpoint_score_attribute: str | None = None


def env_label(env: Any) -> str:
    """How a run names its env: the id, or the class/creator name."""
    if isinstance(env, str):
        return env
    return getattr(env, "__name__", type(env).__name__)


def first(*values: Any) -> Any:
    """The first value that is not None (None when all are)."""
    return next((v for v in values if v is not None), None)


def record(result: dict[str, Any], outcome: TrialOutcome) -> None:
    """Update `outcome` with one training result: progress, final and best return."""
    outcome.iterations = int(result.get("training_iteration", 0))
    outcome.env_steps = int(result.get("num_env_steps_sampled_lifetime", 0) or 0)
    outcome.time_s = float(result.get("time_total_s", 0.0) or 0.0)
    ret = lookup(result, RETURN_KEY)
    if isinstance(ret, (int, float)) and not math.isnan(ret):
        outcome.final_return = float(ret)
        if outcome.best_return is None or ret > outcome.best_return:
            outcome.best_return = float(ret)
            outcome.best_iteration = outcome.iterations


def evaluate_command(outcome: TrialOutcome) -> str:
    """The exact `rlx evaluate` command for the outcome's best checkpoint (with a score
    attribute) or its last one."""
    parts = ["rlx", "evaluate", shlex.quote(str(outcome.best_checkpoint or outcome.checkpoint)), "--algo", outcome.algo]
    if isinstance(outcome.env, str):
        parts += ["--env", shlex.quote(outcome.env)]
    return " ".join(parts)


def print_summary(outcome: TrialOutcome, out: TextIO) -> None:
    """Final and best return, where results and checkpoints are, and how to evaluate."""

    def fmt(value: float | None) -> str:
        return "n/a (no episode finished)" if value is None else f"{value:.1f}"

    reason = f" ({outcome.stop_reason})" if outcome.stop_reason else ""
    lines = [
        "",
        f"Finished {outcome.algo} on {env_label(outcome.env)}: {outcome.iterations} iterations, "
        f"{outcome.env_steps:,} env steps, {format_seconds(outcome.time_s)}{reason}.",
        f"  Final return: {fmt(outcome.final_return)}"
        + (f"   best: {fmt(outcome.best_return)} (iteration {outcome.best_iteration})"
           if outcome.best_return is not None else ""),
        f"  Results:      {outcome.trial_dir}",
        f"  TensorBoard:  tensorboard --logdir {shlex.quote(str(outcome.trial_dir.parent))}",
    ]
    if outcome.checkpoint:
        lines.append(f"  Checkpoint:   {outcome.checkpoint}")
        if outcome.best_checkpoint and Path(outcome.best_checkpoint).exists():
            score = "n/a" if outcome.best_checkpoint_score is None else f"{outcome.best_checkpoint_score:g}"
            lines.append(f"  Best:         {outcome.best_checkpoint} ({outcome.checkpoint_score_attribute}={score})")
        lines += ["Evaluate it with:", f"  {evaluate_command(outcome)}"]
    else:
        lines.append("  No checkpoint saved (use --checkpoint-at-end or --checkpoint-freq N).")
    out.write("\n".join(lines) + "\n")
    out.flush()
