"""CountBasedCuriosity: a learner connector adding 1/count(obs) bonuses to the rewards."""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2


class CountBasedCuriosity(ConnectorV2):
    """Adds `intrinsic_reward_coeff / C(obs)` to each step's reward, C being how often (over the
    whole run) that observation was seen. Use as
    `config.training(learner_connector=lambda obs_space, act_space: CountBasedCuriosity())`.

    Args:
        intrinsic_reward_coeff: weight of the bonus.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 intrinsic_reward_coeff: float = 1.0, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.counts: Counter = Counter()
        self.intrinsic_reward_coeff = float(intrinsic_reward_coeff)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            observations = episode.get_observations(slice(None, -1))
            rewards = episode.get_rewards()
            new = []
            for obs, reward in zip(observations, rewards):
                key = tuple(np.asarray(obs).reshape(-1).tolist())
                self.counts[key] += 1
                new.append(reward + self.intrinsic_reward_coeff / self.counts[key])
            episode.set_rewards(new_data=new, at_indices=slice(0, len(new)))
        return batch
