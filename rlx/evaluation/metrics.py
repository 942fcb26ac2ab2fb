"""Summaries of EnvRunner metrics for custom evaluation functions (`ray.rllib.evaluation.metrics`)."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.results import env_runner_section, legacy_episode_keys
from rlx.utils.metrics.metrics_logger import MetricsLogger


def summarize_runner_metrics(runner_metrics: list[dict], keep_per_episode_custom_metrics: bool = False) -> dict[str, Any]:
    """Merge the `get_metrics()` dicts of several EnvRunners into evaluation-style results:
    `{"env_runners": {...}, "episode_reward_mean": ..., ...}`."""
    merged = MetricsLogger()
    merged.merge_and_log_n_dicts(list(runner_metrics), key="env_runners")
    reduced = merged.reduce().get("env_runners", {}) if runner_metrics else {}
    env_runners = env_runner_section(reduced, keep_per_episode_custom_metrics)
    return {"env_runners": env_runners, **legacy_episode_keys(env_runners)}


def collect_metrics(workers: Any, keep_per_episode_custom_metrics: bool = False) -> dict[str, Any]:
    """What the runners of `workers` (an EnvRunnerGroup) collected since the last call, summarized.

    Custom evaluation functions call this after sampling on the evaluation runners:
    `eval_workers.foreach_env_runner(lambda w: w.sample()); return collect_metrics(eval_workers)`.
    """
    return summarize_runner_metrics(workers.get_metrics(), keep_per_episode_custom_metrics)
