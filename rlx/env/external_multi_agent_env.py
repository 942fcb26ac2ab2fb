"""ExternalMultiAgentEnv: a multi-agent env driving its own loop (`ray.rllib.env.external_multi_agent_env`).

Subclass it and write `run()`: start episodes, ask for the agents' actions with a dict of
their observations (`get_action` returns a dict of actions) or log the actions taken,
log rewards (and per-agent dones) as dicts, and end episodes. Train on it with a
multi-agent config, returning it from `input_`:

    config.environment(env=None, observation_space=obs_space, action_space=act_space) \\
          .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, episode, **kw: f"p{aid}") \\
          .offline_data(input_=lambda ioctx: MySimulator(act_space, obs_space))

Each agent acts with the policy that policy_mapping_fn gives it (once per episode); its
steps become rows of that policy's batch, the same MultiAgentBatch a multi-agent EnvRunner
samples (rlx.env.external.multi_agent). Agents may act in turns: an agent's step ends when
it next observes (its rewards add up until then), when it is marked done, or at the end.
"""
from __future__ import annotations

from typing import Any

from rlx.env.external_env import ExternalEnv
from rlx.utils.errors import ConfigError


class ExternalMultiAgentEnv(ExternalEnv):
    """An external env with several agents per episode: observations, actions, rewards and
    dones are dicts keyed by agent id.

    Args:
        action_space: the agents' action space (a dict of spaces per agent id, or one space).
        observation_space: the agents' observation space (a dict of spaces per agent id, or one
            space). The policies' spaces are the config's (PolicySpec or config.environment).
    """

    #: Marks multi-agent external envs for rlx.env.external.reader.
    _rlx_multi_agent = True

    def __init__(self, action_space: Any, observation_space: Any):
        super().__init__(action_space, observation_space)
        if isinstance(action_space, dict) and isinstance(observation_space, dict) and \
                set(action_space) != set(observation_space):
            raise ConfigError(f"The agent ids of the action space dict {sorted(map(str, action_space))} and the "
                              f"observation space dict {sorted(map(str, observation_space))} differ: give both "
                              "spaces for the same agents.")

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Record the start of a multi-agent episode; returns its id (a fresh one when
        `episode_id` is None). With `training_enabled=False` its steps are not trained on."""
        return self._connected.start_episode(episode_id, training_enabled)

    def get_action(self, episode_id: str, observation_dict: dict) -> dict:
        """The policies' actions for the agents in `observation_dict` (a dict keyed by the same
        agent ids). An agent marked done gets no action: this observation is its last."""
        return self._connected.get_action(episode_id, observation_dict)

    def log_action(self, episode_id: str, observation_dict: dict, action_dict: dict) -> None:
        """Record the agents' observations and the actions taken (off-policy): an action for each
        observing agent, except agents marked done."""
        self._connected.log_action(episode_id, observation_dict, action_dict)

    # RLlib's multi-agent signature (per-agent dicts) differs from ExternalEnv's on purpose.
    def log_returns(self, episode_id: str, reward_dict: dict,  # type: ignore[override]
                    info_dict: dict | None = None, multiagent_done_dict: dict | None = None) -> None:
        """Record rewards for the agents' last actions (they add up until an agent's next action);
        `multiagent_done_dict` marks agents done ({agent_id: True}; {"__all__": True}: all),
        which ends their last step as terminated at their next observation."""
        self._connected.log_returns(episode_id, reward_dict, info_dict, multiagent_done_dict)

    def end_episode(self, episode_id: str, observation_dict: dict, truncated: bool = False) -> None:
        """Record the end of the episode at the agents' final observations (an agent missing
        from them ends at its last one): terminated, or with `truncated=True` cut by a time
        limit for the agents not marked done."""
        self._connected.end_episode(episode_id, observation_dict, truncated)
