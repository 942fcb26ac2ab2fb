"""AddObservationsFromEpisodesToBatch: put each episode's latest observation (or, as a learner
connector, all its observations but the last) into the batch's OBS column."""
from __future__ import annotations

from typing import Any

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class AddObservationsFromEpisodesToBatch(ConnectorV2):
    """Fills `batch["obs"]` from the episodes unless an earlier piece already did.

    Args:
        as_learner_connector: add every observation but the final one of each episode (what a
            Learner trains on) instead of only the latest one (what a module acts on).
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 as_learner_connector: bool = False, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._as_learner_connector = bool(as_learner_connector)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if Columns.OBS in batch:
            return batch
        for sa_episode in self.single_agent_episode_iterator(
                episodes, agents_that_stepped_only=not self._as_learner_connector):
            if self._as_learner_connector:
                observations = sa_episode.get_observations(slice(0, len(sa_episode)))
                for obs in observations:
                    self.add_batch_item(batch, Columns.OBS, obs, sa_episode)
            else:
                self.add_batch_item(batch, Columns.OBS, sa_episode.get_observations(-1), sa_episode)
        return batch
