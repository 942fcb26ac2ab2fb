"""AgentToModuleMapping and ModuleToAgentUnmapping: regroup multi-agent batch items by module."""
from __future__ import annotations

from typing import Any, Callable

from rlx.connectors.connector_v2 import ConnectorV2


class AgentToModuleMapping(ConnectorV2):
    """Turns {column: {(episode id, agent id, module id): [items]}} into
    {module id: {column: {(episode id, agent id, module id): [items]}}}."""

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 rl_module_specs: Any = None, agent_to_module_mapping_fn: Callable | None = None, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._rl_module_specs = rl_module_specs
        self._mapping_fn = agent_to_module_mapping_fn

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        out: dict[Any, dict[str, Any]] = {}
        for column, data in batch.items():
            if not isinstance(data, dict):
                raise ValueError(f"AgentToModuleMapping needs per-episode items in column {column!r} "
                                 "(add them with add_batch_item(..., single_agent_episode=...)).")
            for key, items in data.items():
                module_id = key[2] if len(key) > 2 else None
                out.setdefault(module_id, {}).setdefault(column, {})[key] = items
        return out


class ModuleToAgentUnmapping(ConnectorV2):
    """Turns {module id: {column: {(episode id, agent id, module id): [items]}}} back into
    {column: {(episode id, agent id, module id): [items]}}."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        out: dict[str, Any] = {}
        for per_column in batch.values():
            for column, data in per_column.items():
                if isinstance(data, dict):
                    out.setdefault(column, {}).update(data)
                else:
                    out[column] = data
        return out
