"""RemoveSingleTsTimeDimFromBatch: drop the time axis a stateful module's outputs carry."""
from __future__ import annotations

from typing import Any

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class RemoveSingleTsTimeDimFromBatch(ConnectorV2):
    """For a stateful module, squeezes the length-1 time axis out of every column but STATE_OUT."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        fn = getattr(rl_module, "is_stateful", None)
        if not (callable(fn) and fn()):
            return batch
        for column, value in list(batch.items()):
            if column != Columns.STATE_OUT and hasattr(value, "shape") and len(value.shape) > 1 and value.shape[1] == 1:
                batch[column] = value[:, 0]
        return batch
