"""Throughput of a training iteration: env steps sampled and trained, and learner updates, per
second, added to its result dict (and drawn first in TensorBoard, after the return)."""
from __future__ import annotations

from typing import Any

#: Result keys (RLlib's new API stack names env steps sampled per second so).
SAMPLED_THROUGHPUT = "num_env_steps_sampled_lifetime_throughput"  # under result["env_runners"]
TRAINED_THROUGHPUT = "num_env_steps_trained_lifetime_throughput"
LEARNER_UPDATES_THROUGHPUT = "num_learner_updates_throughput"


def add_throughput(result: dict[str, Any], sampled: int, trained: int, learner_updates: int,
                   seconds: float) -> None:
    """Add the iteration's rates to `result`: `env_runners/num_env_steps_sampled_lifetime_throughput`
    (env steps sampled per second), `num_env_steps_trained_lifetime_throughput` (env steps
    trained per second) and `num_learner_updates_throughput` (learner updates, i.e. new weight
    versions, per second), each over the iteration's wall-clock `seconds`."""
    if seconds <= 0:
        return
    result.setdefault("env_runners", {})[SAMPLED_THROUGHPUT] = sampled / seconds
    result[TRAINED_THROUGHPUT] = trained / seconds
    result[LEARNER_UPDATES_THROUGHPUT] = learner_updates / seconds
