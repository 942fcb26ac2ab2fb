"""BatchIndividualItems: stack the per-episode item lists of each column into arrays."""
from __future__ import annotations

from typing import Any

from rlx.connectors.connector_v2 import ConnectorV2, batch_items_to_array


class BatchIndividualItems(ConnectorV2):
    """Turns {column: {episode key: [items]}} (or {column: [items]}) into {column: array}, items
    in episode order; multi-agent batches become {module id: {column: array}}.

    Args:
        multi_agent: group the items by the module id in their episode key.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 multi_agent: bool = False, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._multi_agent = bool(multi_agent)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        out: dict[str, Any] = {}
        for column, data in batch.items():
            if isinstance(data, dict) and data and all(isinstance(k, tuple) for k in data):
                if self._multi_agent:
                    per_module: dict[Any, list] = {}
                    for key, items in data.items():
                        per_module.setdefault(key[2] if len(key) > 2 else None, []).extend(items)
                    for module_id, items in per_module.items():
                        out.setdefault(module_id, {})[column] = batch_items_to_array(items)
                else:
                    items = [item for group in data.values() for item in group]
                    out[column] = batch_items_to_array(items)
            elif isinstance(data, list) and data:
                out[column] = batch_items_to_array(data)
            else:
                out[column] = data
        return out
