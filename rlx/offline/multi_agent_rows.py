"""Multi-agent offline rows: which module each row trains, and one table of several modules' rows.

OfflinePreLearner maps a batch of raw rows to a flat train batch `{"<module_id>/<column>":
array}`. Rows of several agents name their module in a `module_id` column, or their agent in
an `agent_id` column (the config's `policy_mapping_fn` then names the module); multi-agent
records (`MultiAgentBatch` JSON lines, `MultiAgentEpisode` states) name it themselves. Modules
rarely get the same number of rows, while a `ray.data` batch is a table whose columns have
one length: `pad_modules` pads every module's columns to the longest with rows marked False in
`PADDING_COLUMN`, and `strip_padding` (in OfflineData's collate function) takes them out again.
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: The column marking a module's real rows (True) in a padded multi-module train batch.
PADDING_COLUMN = "rlx_real_row"


def module_of_agent(config: Any, agent_id: Any) -> str:
    """The module `agent_id` trains, by the config's policy_mapping_fn (called without an
    episode: offline rows have none), or its only policy."""
    policies = list(getattr(config, "policies", None) or [])
    mapping_fn = getattr(config, "policy_mapping_fn", None)
    if mapping_fn is None or len(policies) == 1:
        if len(policies) == 1:
            return str(policies[0])
        raise ValueError(f"Offline rows name agent {agent_id!r} but the config has no policy_mapping_fn to find its "
                         "module; add a 'module_id' column or configure .multi_agent(policy_mapping_fn=...).")
    return str(mapping_fn(agent_id, None, worker=None))


def row_modules(config: Any, module_ids: Any, agent_ids: Any) -> np.ndarray | None:
    """Each row's module id (from its `module_id`, else its `agent_id` column), or None when the
    rows name neither (all train the default module)."""
    if module_ids is not None:
        return np.asarray([str(m) for m in module_ids])
    if agent_ids is not None:
        cache: dict[Any, str] = {}
        out = []
        for aid in agent_ids:
            key = aid.item() if isinstance(aid, np.generic) else aid
            if key not in cache:
                cache[key] = module_of_agent(config, key)
            out.append(cache[key])
        return np.asarray(out)
    return None


def pad_modules(per_module: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """Several modules' columns padded to one number of rows (zeros, or None in object columns),
    each module's real rows marked in PADDING_COLUMN; a single module's as they are."""
    if len(per_module) <= 1:
        return per_module
    lengths = {mid: _rows(columns) for mid, columns in per_module.items()}
    n = max(lengths.values())
    out = {}
    for mid, columns in per_module.items():
        k = lengths[mid]
        padded = {name: _pad(values, n - k) for name, values in columns.items()}
        padded[PADDING_COLUMN] = np.arange(n) < k
        out[mid] = padded
    return out


def strip_padding(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One module's columns without the padding rows `pad_modules` added."""
    real = columns.get(PADDING_COLUMN)
    if real is None:
        return columns
    keep = np.asarray(real, bool)
    return {name: np.asarray(values)[keep] for name, values in columns.items() if name != PADDING_COLUMN}


def _rows(columns: dict[str, np.ndarray]) -> int:
    return len(next(iter(columns.values()))) if columns else 0


def _pad(values: np.ndarray, extra: int) -> np.ndarray:
    values = np.asarray(values)
    if extra <= 0:
        return values
    filler = np.zeros((extra,) + values.shape[1:], values.dtype) if values.dtype != object else \
        np.full((extra,) + values.shape[1:], None, object)
    return np.concatenate([values, filler])
