"""FlattenObservations: turn each observation into one flat float32 vector (one-hot for discrete
parts, concatenated for Dict and Tuple spaces)."""
from __future__ import annotations

from typing import Any, Iterable

import gymnasium as gym
import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.preprocessors import get_preprocessor


def _flattener(space: gym.Space) -> Any:
    return get_preprocessor(space)(space, {})


class FlattenObservations(ConnectorV2):
    """Flattens the latest observation of each episode (writing it back into the episode), or,
    as a learner connector, every observation of the batch.

    Args:
        multi_agent: the observation space is a Dict keyed by agent id; each agent's observations
            are flattened with its own space.
        agent_ids: with multi_agent, flatten only these agents' observations.
        as_learner_connector: flatten all observations of the episodes (learner pipeline).
    """

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, *, multi_agent: bool = False,
                 agent_ids: Iterable[Any] | None = None, as_learner_connector: bool = False, **kwargs: Any):
        self._multi_agent = bool(multi_agent)
        self._agent_ids = None if agent_ids is None else set(agent_ids)
        self._as_learner_connector = bool(as_learner_connector)
        self._flatteners: dict[Any, Any] = {}
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        if self._multi_agent:
            if not isinstance(input_observation_space, gym.spaces.Dict):
                raise ValueError("FlattenObservations(multi_agent=True) needs a Dict observation space keyed by "
                                 f"agent id; got {input_observation_space}.")
            spaces = {}
            for aid, space in input_observation_space.spaces.items():
                if self._agent_ids is None or aid in self._agent_ids:
                    self._flatteners[aid] = _flattener(space)
                    spaces[aid] = self._flatteners[aid].observation_space
                else:
                    spaces[aid] = space
            return gym.spaces.Dict(spaces)
        self._flatteners = {None: _flattener(input_observation_space)}
        return self._flatteners[None].observation_space

    def _flat(self, obs: Any, agent_id: Any) -> np.ndarray | None:
        flattener = self._flatteners.get(agent_id if self._multi_agent else None)
        return None if flattener is None else np.asarray(flattener.transform(obs), dtype=np.float32)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if self._as_learner_connector:
            for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
                aid = getattr(sa_episode, "agent_id", None)
                if self._multi_agent and aid not in self._flatteners:
                    continue
                observations = sa_episode.get_observations()
                flat = [self._flat(o, aid) for o in observations]
                sa_episode.set_observations(new_data=flat)
            return batch
        for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=True):
            aid = getattr(sa_episode, "agent_id", None)
            if self._multi_agent and aid not in self._flatteners:
                continue
            sa_episode.set_observations(at_indices=-1, new_data=self._flat(sa_episode.get_observations(-1), aid))
        return batch
