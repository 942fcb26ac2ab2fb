"""AddStatesFromEpisodesToBatch and AddTimeDimToBatchAndZeroPad: the recurrent-module pieces."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


def _is_stateful(rl_module: Any) -> bool:
    fn = getattr(rl_module, "is_stateful", None)
    return bool(fn()) if callable(fn) else False


class AddStatesFromEpisodesToBatch(ConnectorV2):
    """For a stateful (recurrent) module, adds each episode's latest STATE_OUT (its initial state at
    the episode's start) as the batch's STATE_IN; does nothing for stateless modules."""

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 as_learner_connector: bool = False, max_seq_len: int | None = None, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._as_learner_connector = bool(as_learner_connector)
        self.max_seq_len = max_seq_len

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if not _is_stateful(rl_module) or Columns.STATE_IN in batch:
            return batch
        for sa_episode in self.single_agent_episode_iterator(episodes):
            try:
                state = sa_episode.get_extra_model_outputs(Columns.STATE_OUT, -1)
            except (KeyError, IndexError):
                state = None
            if state is None:
                state = rl_module.get_initial_state()
            self.add_batch_item(batch, Columns.STATE_IN, state, sa_episode)
        return batch


class AddTimeDimToBatchAndZeroPad(ConnectorV2):
    """For a stateful module, gives every batch item a time axis of length 1 (env-to-module);
    stateless modules' batches pass unchanged."""

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 as_learner_connector: bool = False, max_seq_len: int | None = None, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._as_learner_connector = bool(as_learner_connector)
        self.max_seq_len = max_seq_len

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if not _is_stateful(rl_module):
            return batch
        for column in list(batch):
            if column == Columns.STATE_IN:
                continue
            self.foreach_batch_item_change_in_place(
                batch, column, lambda item, *_: np.expand_dims(np.asarray(item), 0))
        return batch
