"""ListifyDataForVectorEnv and UnBatchToIndividualItems: one item per sub-env, in order."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2


def _rows(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rows(v) for k, v in value.items()}
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return [value[i] for i in range(value.shape[0])]
    return value


class UnBatchToIndividualItems(ConnectorV2):
    """Splits every batched column into a list of per-row items (one per episode, in order)."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        return {k: _rows(v) for k, v in batch.items()}


class ListifyDataForVectorEnv(UnBatchToIndividualItems):
    """Turns the batch into per-sub-env lists of items (what a vector env's step() takes)."""
