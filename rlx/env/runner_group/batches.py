"""The batches an EnvRunnerGroup samples: joined along time (one runner's fragments) or side by
side (different runners), and counted in env or agent steps."""
from __future__ import annotations

from typing import Any

from rlx.core.sample_batch import as_multi_agent, concat_time, join_side_by_side

__all__ = ["concat_batches", "env_steps_of", "join_runner_batches", "num_sampled_steps"]


def concat_batches(batches: list[Any]) -> Any:
    """Join time-major batches of the same sub-envs along the time axis."""
    return concat_time(batches)


def join_runner_batches(batches: list[Any]) -> Any:
    """Join time-major batches of different runners side by side (along the sub-env axis).

    Batches of different lengths are padded at the end with rows marked invalid, so every
    column keeps its own sub-env's trajectory.
    """
    return join_side_by_side(batches)


def env_steps_of(batch: Any) -> int:
    """Env steps in a sampled batch."""
    return as_multi_agent(batch).env_steps()


def num_sampled_steps(batch: Any, count_steps_by: str = "env_steps") -> int:
    """Env steps in a sampled batch (its agent steps with count_steps_by='agent_steps')."""
    batch = as_multi_agent(batch)
    return batch.agent_steps() if count_steps_by == "agent_steps" else batch.env_steps()
