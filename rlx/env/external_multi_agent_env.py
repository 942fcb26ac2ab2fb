"""ExternalMultiAgentEnv: a multi-agent env driving its own loop (`ray.rllib.env.external_multi_agent_env`).

The episode methods take and return dicts keyed by agent id. rlx trains one policy from
external episodes for now (rlx.env.external.reader), so giving an ExternalMultiAgentEnv to
an Algorithm raises NotSupportedYetError naming the missing piece; the class is here so
code written against RLlib imports and subclasses it unchanged.
"""
from __future__ import annotations

from typing import Any

from rlx.env.external_env import ExternalEnv
from rlx.utils.errors import NotSupportedYetError


class ExternalMultiAgentEnv(ExternalEnv):
    """An external env with several agents per episode: observations, actions, rewards and
    dones are dicts keyed by agent id.

    Args:
        action_space: the agents' action space (a Dict space or one shared space).
        observation_space: the agents' observation space (a Dict space or one shared space).
    """

    def _attach(self, backend: Any) -> None:
        raise NotSupportedYetError(
            f"training from {type(self).__name__} (an ExternalMultiAgentEnv)",
            "external episodes feed one policy for now",
            fix="Report each agent's steps as episodes of an ExternalEnv or a PolicyClient of one policy.")

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Record the start of a multi-agent episode; returns its id."""
        return self._connected.start_episode(episode_id, training_enabled)

    def get_action(self, episode_id: str, observation_dict: dict) -> dict:
        """The policies' actions for the agents in `observation_dict`."""
        return self._connected.get_action(episode_id, observation_dict)

    def log_action(self, episode_id: str, observation_dict: dict, action_dict: dict) -> None:
        """Record the agents' observations and the actions taken (off-policy)."""
        self._connected.log_action(episode_id, observation_dict, action_dict)

    def log_returns(self, episode_id: str, reward_dict: dict, info_dict: dict | None = None,
                    multiagent_done_dict: dict | None = None) -> None:
        """Record rewards (and per-agent dones) for the agents' last actions."""
        self._connected.log_returns(episode_id, reward_dict, info_dict, multiagent_done_dict)

    def end_episode(self, episode_id: str, observation_dict: dict, truncated: bool = False) -> None:
        """Record the end of the episode at the agents' final observations."""
        self._connected.end_episode(episode_id, observation_dict, truncated)
