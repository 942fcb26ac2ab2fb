"""Splitting a train batch among data-parallel learners and merging their metrics back.

Time-major batches ([T, B] `rewards`, from EnvRunners) are split along the env axis B, so each
learner keeps whole time series; flat batches (replay) along axis 0. Rank r gets indices
r, r + N, r + 2N, ... (strided, so that without shuffling each rank's k-th minibatch holds
exactly its share of a single learner's k-th minibatch). Metrics are averaged over the ranks;
per-sample arrays (DQN's `td_error`) are put back in batch order.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["merge_metrics", "shard_batch"]

#: Column whose shape tells time-major [T, B] batches from flat [N] ones.
_SHAPE_COLUMN = "rewards"


def _batch_layout(batch: Mapping[str, Any]) -> tuple[int, int, tuple[int, ...]]:
    """(shard axis, its length, the leading shape a column must have to be sharded)."""
    ref = batch.get(_SHAPE_COLUMN)
    if ref is None or not hasattr(ref, "shape"):
        ref = next((v for v in batch.values() if hasattr(v, "shape") and len(v.shape) >= 1), None)
        if ref is None:
            raise ValueError("LearnerGroup.update_from_batch: the batch holds no arrays to split among the learners.")
    shape = tuple(ref.shape)
    if len(shape) >= 2:  # time-major [T, B]: split the B (env) axis, keep each env's time series whole
        return 1, shape[1], shape[:2]
    return 0, shape[0], shape[:1]


def shard_batch(batch: Mapping[str, Any], num_shards: int) -> tuple[list[dict[str, Any] | None], int]:
    """Split `batch` into `num_shards` shards along its batch axis; (shards, axis).

    Time-major batches ([T, B] `rewards`) are split along B, flat ones along axis 0.
    Shard r holds indices r, r + n, r + 2n, ...; columns whose leading shape does not
    match (scalars such as `n_step`, non-arrays) go whole to every shard. A shard with no
    rows is None.
    """
    axis, length, lead = _batch_layout(batch)
    shards: list[dict[str, Any] | None] = []
    for r in range(num_shards):
        if r >= length:
            shards.append(None)
            continue
        shard: dict[str, Any] = {}
        for key, value in batch.items():
            shape = getattr(value, "shape", None)
            if shape is not None and tuple(shape[: len(lead)]) == lead:
                part = value[r::num_shards] if axis == 0 else value[:, r::num_shards]
                if isinstance(part, np.ndarray):
                    part = np.ascontiguousarray(part)
                shard[key] = part
            else:
                shard[key] = value
        shards.append(shard)
    return shards, axis


def merge_metrics(results: list[dict[str, Any]], axis: int, num_shards: int) -> dict[str, Any]:
    """Average the ranks' metrics; per-sample arrays are put back in batch order.

    `results[r]` must be rank r's metrics (ranks without a shard left out at the end).
    Numbers are averaged (ints that agree stay ints); arrays of ndim >= 1 are interleaved
    along the shard axis (the inverse of `shard_batch`); anything else is rank 0's.
    """
    if not results:
        return {}
    merged: dict[str, Any] = {}
    for key, first in results[0].items():
        values = [res[key] for res in results if key in res]
        if isinstance(first, dict):
            merged[key] = merge_metrics([v for v in values if isinstance(v, dict)], axis, num_shards)
        elif isinstance(first, np.ndarray) and first.ndim >= 1 and all(isinstance(v, np.ndarray) for v in values):
            merged[key] = _interleave(values, axis if first.ndim > axis else 0, num_shards)
        elif _is_number(first) and all(_is_number(v) for v in values):
            if all(isinstance(v, (int, np.integer)) for v in values) and len({int(v) for v in values}) == 1:
                merged[key] = int(first)
            else:
                merged[key] = float(np.mean([float(v) for v in values]))
        else:
            merged[key] = first
    return merged


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _interleave(parts: list[np.ndarray], axis: int, num_shards: int) -> np.ndarray:
    total = sum(p.shape[axis] for p in parts)
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[axis] = total
    rest = [p.shape[:axis] + p.shape[axis + 1:] for p in parts]
    if any(r != rest[0] for r in rest):
        return np.concatenate(parts, axis=axis)
    out = np.empty(shape, dtype=np.result_type(*parts))
    for r, part in enumerate(parts):
        index: list[Any] = [slice(None)] * len(shape)
        index[axis] = slice(r, None, num_shards)
        out[tuple(index)] = part
    return out

