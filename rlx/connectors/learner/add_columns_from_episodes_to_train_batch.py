"""Learner pieces that add episode data to the train batch; rlx's batches already hold it."""
from __future__ import annotations

from typing import Any

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class _ColumnsPresent(ConnectorV2):
    """Checks that the train batch has the columns this piece would add (rlx's EnvRunners put
    them there when sampling), and leaves it as it is."""

    columns: tuple[str, ...] = ()

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 as_learner_connector: bool = True, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        missing = [c for c in self.columns if c not in batch]
        if missing:
            raise ValueError(f"{self.name}: the train batch has no {', '.join(map(repr, missing))} column(s); "
                             f"it has {sorted(batch)}.")
        return batch


class AddColumnsFromEpisodesToTrainBatch(_ColumnsPresent):
    """RLlib's piece that adds actions, rewards, flags and model outputs to the train batch."""

    columns = (Columns.ACTIONS, Columns.REWARDS, Columns.TERMINATEDS, Columns.TRUNCATEDS)


class AddNextObservationsFromEpisodesToTrainBatch(_ColumnsPresent):
    """RLlib's piece that adds NEXT_OBS to the train batch."""

    columns = (Columns.NEXT_OBS,)


class AddOneTsToEpisodesAndTruncate(_ColumnsPresent):
    """RLlib's piece that extends episodes by one step for value bootstrapping; rlx's Learners
    bootstrap from NEXT_OBS instead."""

    columns = (Columns.NEXT_OBS,)


class AddInfosFromEpisodesToTrainBatch(ConnectorV2):
    """Adds an INFOS column (empty dicts where the runner kept none) to the train batch."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        import numpy as np

        if Columns.INFOS not in batch:
            infos = np.empty(np.shape(batch[Columns.REWARDS]), dtype=object)
            infos.fill({})
            batch[Columns.INFOS] = infos
        return batch
