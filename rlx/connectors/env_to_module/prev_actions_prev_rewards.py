"""PrevActionsPrevRewards: add the last n actions (one-hot) and rewards to each observation."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2


class PrevActionsPrevRewards(ConnectorV2):
    """Rewrites each episode's latest observation as
    {"_obs": obs, "prev_n_actions": ..., "prev_n_rewards": ...} (zeros before the episode's start).

    Actions must be Discrete (one-hot encoded, n_prev_actions of them concatenated) or Box
    (flattened). Add FlattenObservations after this piece for modules that need flat inputs
    (rlx's default modules flatten Dict observations themselves).

    Args:
        multi_agent: the spaces are Dicts keyed by agent id.
        n_prev_actions: how many previous actions to add.
        n_prev_rewards: how many previous rewards to add.
    """

    ORIG_OBS_KEY = "_obs"
    PREV_ACTIONS_KEY = "prev_n_actions"
    PREV_REWARDS_KEY = "prev_n_rewards"

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, *, multi_agent: bool = False,
                 n_prev_actions: int = 1, n_prev_rewards: int = 1, **kwargs: Any):
        self._multi_agent = bool(multi_agent)
        self.n_prev_actions = int(n_prev_actions)
        self.n_prev_rewards = int(n_prev_rewards)
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def _action_size(self, act_space: gym.Space) -> int:
        if isinstance(act_space, gym.spaces.Discrete):
            return int(act_space.n)
        if isinstance(act_space, gym.spaces.Box):
            return int(np.prod(act_space.shape))
        raise ValueError(f"PrevActionsPrevRewards supports Discrete and Box action spaces, got {act_space}.")

    def _space(self, obs_space: gym.Space, act_space: gym.Space) -> gym.Space:
        spaces = {self.ORIG_OBS_KEY: obs_space}
        if self.n_prev_actions:
            size = self._action_size(act_space) * self.n_prev_actions
            low, high = (0.0, 1.0) if isinstance(act_space, gym.spaces.Discrete) else (-np.inf, np.inf)
            spaces[self.PREV_ACTIONS_KEY] = gym.spaces.Box(low, high, (size,), np.float32)
        if self.n_prev_rewards:
            spaces[self.PREV_REWARDS_KEY] = gym.spaces.Box(-np.inf, np.inf, (self.n_prev_rewards,), np.float32)
        return gym.spaces.Dict(spaces)

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        if input_action_space is None:
            return input_observation_space
        if self._multi_agent:
            return gym.spaces.Dict({aid: self._space(space, input_action_space[aid])
                                    for aid, space in input_observation_space.spaces.items()})
        return self._space(input_observation_space, input_action_space)

    def _encode_actions(self, actions: list[Any], act_space: gym.Space) -> np.ndarray:
        size = self._action_size(act_space)
        out = np.zeros((len(actions), size), np.float32)
        for i, action in enumerate(actions):
            if action is None:
                continue
            if isinstance(act_space, gym.spaces.Discrete):
                out[i, int(action)] = 1.0
            else:
                out[i] = np.asarray(action, np.float32).reshape(-1)
        return out.reshape(-1)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=True):
            act_space = self.input_action_space
            if self._multi_agent:
                act_space = act_space[sa_episode.agent_id]
            augmented = {self.ORIG_OBS_KEY: sa_episode.get_observations(-1)}
            if self.n_prev_actions:
                recent = sa_episode.get_actions(slice(-self.n_prev_actions, None), fill=None)
                augmented[self.PREV_ACTIONS_KEY] = self._encode_actions(recent, act_space)
            if self.n_prev_rewards:
                recent = sa_episode.get_rewards(slice(-self.n_prev_rewards, None), fill=0.0)
                augmented[self.PREV_REWARDS_KEY] = np.asarray(recent, np.float32)
            sa_episode.set_observations(at_indices=-1, new_data=augmented)
        return batch
