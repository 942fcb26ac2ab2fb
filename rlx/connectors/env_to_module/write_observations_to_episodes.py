"""WriteObservationsToEpisodes: store the batch's (processed) observations back into the episodes."""
from __future__ import annotations

from typing import Any

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class WriteObservationsToEpisodes(ConnectorV2):
    """Replaces each episode's latest observation by its item in `batch["obs"]` (per-episode
    items, as add_batch_item stores them, or one row per episode in order)."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        column = batch.get(Columns.OBS)
        if column is None:
            return batch
        for items, sa_episode in self.single_agent_episode_iterator(episodes, zip_with_batch_column=column):
            sa_episode.set_observations(at_indices=-1, new_data=items[-1] if isinstance(items, list) else items)
        return batch
