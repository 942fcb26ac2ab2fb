"""`on_postprocess_trajectory`: the old API's per-trajectory callback, on time-major batches.

A runner's batch is per module [T, C]: each column one sub-env's (or one agent's) steps, one
episode after another. The callback gets each (column, episode) stretch as a SampleBatch and
a copy of it as sampled in `original_batches`; whatever it changes (in place or by assigning
a column) is written back into the time-major batch the Learner sees.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from rlx.core.columns import Columns

#: Columns an on_postprocess_trajectory callback may add to a trajectory for the Learner to use.
_POSTPROCESSED_COLUMNS = (Columns.ADVANTAGES, Columns.VALUE_TARGETS)


def episode_runs(episodes: Sequence[Any] | np.ndarray) -> Iterator[tuple[int, int, Any]]:
    """(start, end, episode) of each run of consecutive rows of one column that belong to the
    same episode object (`episodes[t]` is row t's)."""
    t, n = 0, len(episodes)
    while t < n:
        episode = episodes[t]
        end = t + 1
        while end < n and episodes[end] is episode:
            end += 1
        yield t, end, episode
        t = end


def postprocess_stretch(runner: Any, policy_id: str, batch: dict[str, np.ndarray], column: int, rows: slice,
                        episode: Any, agent_id: Any, extra: dict[str, np.ndarray]) -> None:
    """Call the runner's on_postprocess_trajectory handler on rows `rows` of column `column` of
    module `policy_id`'s batch (with the columns in `extra` added) and write back what it changed."""
    from rlx.core.sample_batch import SampleBatch

    segment = SampleBatch({k: v[rows, column] for k, v in batch.items() if k != Columns.VALID})
    segment["dones"] = segment[Columns.TERMINATEDS] | segment[Columns.TRUNCATEDS]
    for key, value in extra.items():
        segment[key] = value
    views = dict(segment)
    policies = runner.policy_map
    # The pre-batch keeps the data as sampled, whatever the callback changes in place.
    original = {policy_id: (policies[policy_id], segment.copy())}
    runner._on_postprocess_trajectory(
        worker=runner, episode=episode, agent_id=agent_id, policy_id=policy_id, policies=policies,
        postprocessed_batch=segment, original_batches=original, env_runner=runner, metrics_logger=runner.metrics)
    write_back_postprocessed(batch, segment, views, (rows, column))


def write_back_postprocessed(batch: dict[str, np.ndarray], segment: Any, views: dict[str, Any], index: tuple) -> None:
    """Write what an on_postprocess_trajectory callback changed in `segment` (columns it
    reassigned, or changed in place through `views`) into `batch[key][index]`. Columns it added
    for the Learner (advantages, value targets) are kept too, NaN in the rows of stretches that
    got none."""
    for key, column in segment.items():
        if key in batch and column is not views.get(key):
            batch[key][index] = column
        elif key in _POSTPROCESSED_COLUMNS and key not in views:
            if key not in batch:
                batch[key] = np.full(batch[Columns.REWARDS].shape + np.shape(column)[1:], np.nan, np.float32)
            batch[key][index] = column
