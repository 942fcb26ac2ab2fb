"""Joining flat offline batches (SampleBatch, MultiAgentBatch of SampleBatches) row-wise."""
from __future__ import annotations

from typing import Any

from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, as_multi_agent, batch_kind, concat_samples


def concat_flat(batches: list[Any]) -> Any:
    """One batch of all rows of `batches`, keeping the columns every batch has (per policy for
    MultiAgentBatches; a single-agent SampleBatch among them counts as policy 'default_policy')."""
    if len(batches) == 1:
        return batches[0]
    if all(batch_kind(b) is SampleBatch for b in batches):
        return _concat_columns(batches)
    per_policy: dict[str, list[Any]] = {}
    per_module = [as_multi_agent(b) for b in batches]
    for batch in per_module:
        for pid, part in batch.policy_batches.items():
            per_policy.setdefault(pid, []).append(part)
    count = sum(b.env_steps() for b in per_module)
    return MultiAgentBatch({pid: _concat_columns(parts) for pid, parts in per_policy.items()}, count)


def _concat_columns(batches: list[Any]) -> SampleBatch:
    """concat_samples (the one row-wise join) of the columns every batch has."""
    keys = [k for k in batches[0] if all(k in b for b in batches[1:])]
    return concat_samples([SampleBatch({k: b[k] for k in keys}) for b in batches])


def num_rows(batch: Any, count_steps_by: str = "env_steps") -> int:
    """Env steps of a flat batch (its agent steps with count_steps_by='agent_steps')."""
    batch = as_multi_agent(batch)
    return batch.agent_steps() if count_steps_by == "agent_steps" else batch.env_steps()
