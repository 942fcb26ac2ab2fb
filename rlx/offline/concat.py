"""Joining flat offline batches (SampleBatch, MultiAgentBatch of SampleBatches) row-wise."""
from __future__ import annotations

from typing import Any

from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, concat_samples


def concat_flat(batches: list[Any]) -> Any:
    """One batch of all rows of `batches`, keeping the columns every batch has (per policy for
    MultiAgentBatches; a single-agent SampleBatch among them counts as policy 'default_policy')."""
    if len(batches) == 1:
        return batches[0]
    if not any(isinstance(b, MultiAgentBatch) for b in batches):
        return _concat_columns(batches)
    per_policy: dict[str, list[Any]] = {}
    for batch in batches:
        parts = batch.policy_batches if isinstance(batch, MultiAgentBatch) else {"default_policy": batch}
        for pid, part in parts.items():
            per_policy.setdefault(pid, []).append(part)
    count = sum(b.env_steps() if isinstance(b, MultiAgentBatch) else len(b) for b in batches)
    return MultiAgentBatch({pid: _concat_columns(parts) for pid, parts in per_policy.items()}, count)


def _concat_columns(batches: list[Any]) -> SampleBatch:
    """concat_samples (the one row-wise join) of the columns every batch has."""
    keys = [k for k in batches[0] if all(k in b for b in batches[1:])]
    return concat_samples([SampleBatch({k: b[k] for k in keys}) for b in batches])


def num_rows(batch: Any, count_steps_by: str = "env_steps") -> int:
    """Env steps of a flat batch (agent steps of a MultiAgentBatch with count_steps_by='agent_steps')."""
    if isinstance(batch, MultiAgentBatch):
        if count_steps_by == "agent_steps":
            return sum(len(b[next(iter(b))]) if len(b) else 0 for b in batch.policy_batches.values())
        return batch.env_steps()
    return len(batch)
