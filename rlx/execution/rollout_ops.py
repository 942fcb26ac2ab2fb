"""`synchronous_parallel_sample` at RLlib's path (`ray.rllib.execution.rollout_ops`).

Custom training loops written for RLlib sample all EnvRunners of a group with it. With
`_uses_new_env_runners=True` the runners return episodes (RLlib's new API stack: a custom
Algorithm's runners, or those of a group built from a config alone); otherwise each runner's
old-API worker view returns a SampleBatch (rlx.env.runner.worker_view).
"""
from __future__ import annotations

import logging
from typing import Any

from rlx.core.sample_batch import concat_samples
from rlx.env.runner.worker_view import with_worker_view

logger = logging.getLogger("rlx")

__all__ = ["synchronous_parallel_sample"]


class _Sample:
    """`runner.sample()` (episodes) or its worker view's (a SampleBatch), with the runner's
    metrics when asked; picklable for remote runners."""

    def __init__(self, episodes: bool, random_actions: bool, metrics: bool):
        self.episodes = episodes
        self.random_actions = random_actions
        self.metrics = metrics

    def __call__(self, runner: Any) -> Any:
        kwargs = {"random_actions": True} if self.random_actions else {}
        if self.episodes:
            sampled = runner.sample(**kwargs)
            if not isinstance(sampled, list):
                raise TypeError(
                    "synchronous_parallel_sample(_uses_new_env_runners=True) needs EnvRunners that return episodes, "
                    f"but this one returned {type(sampled).__name__} (the runners of rlx's own algorithms return "
                    "array batches): set runner.returns_episodes = True, or pass _uses_new_env_runners=False for "
                    "SampleBatches.")
        else:
            sampled = with_worker_view(lambda worker: worker.sample(**kwargs))(runner)
        return (sampled, runner.get_metrics()) if self.metrics else sampled


def synchronous_parallel_sample(
    *,
    worker_set: Any,
    max_agent_steps: int | None = None,
    max_env_steps: int | None = None,
    concat: bool = True,
    sample_timeout_s: float | None = None,
    random_actions: bool = False,
    _uses_new_env_runners: bool = False,
    _return_metrics: bool = False,
) -> Any:
    """Sample every remote EnvRunner of `worker_set` (an EnvRunnerGroup) in parallel, or its
    local one when it has none, round after round until `max_env_steps` (or `max_agent_steps`)
    are collected (one round without either).

    Returns one item per runner and round (a list of episodes with `_uses_new_env_runners`,
    else a SampleBatch / MultiAgentBatch), or with `concat` (default) all episodes in one list
    or all batches concatenated; with `_return_metrics`, (that, [each runner's get_metrics()]).
    """
    if max_agent_steps is not None and max_env_steps is not None:
        raise ValueError("synchronous_parallel_sample(): give at most one of max_agent_steps and max_env_steps.")
    limit = max_agent_steps if max_agent_steps is not None else max_env_steps
    call = _Sample(bool(_uses_new_env_runners), bool(random_actions), bool(_return_metrics))
    collected = 0
    samples: list[Any] = []
    metrics: list[Any] = []
    while (limit is None and collected == 0) or (limit is not None and collected < limit):
        if worker_set.num_remote_env_runners() <= 0:
            results = [call(worker_set.local_env_runner)]
        else:
            results = worker_set.foreach_env_runner(call, local_env_runner=False, timeout_seconds=sample_timeout_s)
            if not results:
                logger.warning("synchronous_parallel_sample(): no samples came back from the remote EnvRunners "
                               "(all stalled or failed); consider a larger sample_timeout_s.")
                break
        for result in results:
            sampled, runner_metrics = result if _return_metrics else (result, None)
            if _return_metrics:
                metrics.append(runner_metrics)
            samples.append(sampled)
            collected += _steps(sampled, agent_steps=max_agent_steps is not None)
            if limit is not None and collected >= limit:
                break
    if concat:
        if _uses_new_env_runners:
            samples = [episode for episodes in samples for episode in episodes]
        else:
            samples = concat_samples(samples) if samples else samples
    return (samples, metrics) if _return_metrics else samples


def _steps(sampled: Any, agent_steps: bool) -> int:
    """Env (or agent) steps of one runner's episodes or batch."""
    items = sampled if isinstance(sampled, list) else [sampled]
    return int(sum(item.agent_steps() if agent_steps else item.env_steps() for item in items))
