"""The episode statistics that train() reports for Algorithms that train on offline data only."""
from __future__ import annotations

from typing import Any

#: Episode statistics copied from the evaluation's env_runners section.
EPISODE_KEYS = ("episode_return_mean", "episode_return_min", "episode_return_max",
                "episode_len_mean", "episode_len_min", "episode_len_max")
#: Their old top-level names.
LEGACY_KEYS = {"episode_reward_mean": "episode_return_mean", "episode_reward_min": "episode_return_min",
               "episode_reward_max": "episode_return_max", "episode_len_mean": "episode_len_mean"}


def report_evaluation_returns(result: dict[str, Any], eval_results: dict[str, Any] | None) -> None:
    """Put the latest evaluation's episode statistics into `result["env_runners"]` (and the old
    top-level `episode_reward_mean`, ...): an Algorithm that reads only offline data steps no
    env while training, so its returns are the evaluation's (RLlib's offline algorithms report
    them under `evaluation` only). Nothing changes before the first evaluation."""
    if not eval_results:
        return
    source = eval_results.get("env_runners") or {}
    target = result.setdefault("env_runners", {})
    for key in EPISODE_KEYS:
        if key in source:
            target[key] = source[key]
    for legacy, key in LEGACY_KEYS.items():
        if key in target:
            result[legacy] = target[key]
