"""Summaries of EnvRunner metrics for custom evaluation functions (`ray.rllib.evaluation.metrics`)."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.results import summarize_runner_metrics

__all__ = ["summarize_runner_metrics", "collect_metrics"]


def collect_metrics(workers: Any, keep_per_episode_custom_metrics: bool = False) -> dict[str, Any]:
    """What the runners of `workers` (an EnvRunnerGroup) collected since the last call, summarized.

    Custom evaluation functions call this after sampling on the evaluation runners:
    `eval_workers.foreach_env_runner(lambda w: w.sample()); return collect_metrics(eval_workers)`.
    """
    return summarize_runner_metrics(workers.get_metrics(), keep_per_episode_custom_metrics)
