"""Observation preprocessors: connector pieces users write as obs -> new obs functions."""
from __future__ import annotations

import abc
from typing import Any


from rlx.connectors.connector_v2 import ConnectorV2


class SingleAgentObservationPreprocessor(ConnectorV2, abc.ABC):
    """Rewrites each (agent's) episode's latest observation with `preprocess(observation, episode)`.

    Override `preprocess`, and `recompute_output_observation_space` when the space changes. In
    multi-agent runs each agent's observation is passed separately (`episode.agent_id` says whose).
    """

    @abc.abstractmethod
    def preprocess(self, observation: Any, episode: Any) -> Any:
        """The new observation for `observation` (the latest of `episode`)."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for sa_episode in self.single_agent_episode_iterator(episodes):
            new_obs = self.preprocess(observation=sa_episode.get_observations(-1), episode=sa_episode)
            sa_episode.set_observations(at_indices=-1, new_data=new_obs)
            sa_episode.observation_space = self.observation_space
        return batch


class MultiAgentObservationPreprocessor(ConnectorV2, abc.ABC):
    """Rewrites each multi-agent episode's latest observations with `preprocess(observations,
    episode)`, which gets and returns a dict {agent id: observation} of the agents that got one."""

    @abc.abstractmethod
    def preprocess(self, observations: dict, episode: Any) -> dict:
        """The new observation dict for `observations` (the latest of `episode`)."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for ma_episode in episodes:
            new_obs = self.preprocess(observations=ma_episode.get_observations(-1), episode=ma_episode)
            if not isinstance(new_obs, dict):
                raise TypeError(f"{self.name}.preprocess() must return a dict of agent observations, got "
                                f"{type(new_obs).__name__}.")
            for aid, obs in new_obs.items():
                ma_episode.agent_episodes[aid].set_observations(at_indices=-1, new_data=obs)
            ma_episode.observation_space = self.observation_space
        return batch


#: The old name of SingleAgentObservationPreprocessor.
ObservationPreprocessor = SingleAgentObservationPreprocessor

__all__ = ["MultiAgentObservationPreprocessor", "ObservationPreprocessor", "SingleAgentObservationPreprocessor"]
