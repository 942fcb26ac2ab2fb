"""EuclidianDistanceBasedCuriosity: a learner connector rewarding observations far from recent ones."""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2


class EuclidianDistanceBasedCuriosity(ConnectorV2):
    """Adds `intrinsic_reward_coeff` to a step's reward when its observation is farther than
    `euclidian_distance_threshold` from every one of the last `max_buffer_size` remembered
    observations (and then remembers it).

    Args:
        euclidian_distance_threshold: how far counts as new.
        max_buffer_size: how many observations to remember.
        intrinsic_reward_coeff: the bonus.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 euclidian_distance_threshold: float = 0.1, max_buffer_size: int = 100,
                 intrinsic_reward_coeff: float = 1.0, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.threshold = float(euclidian_distance_threshold)
        self.buffer: deque = deque(maxlen=int(max_buffer_size))
        self.intrinsic_reward_coeff = float(intrinsic_reward_coeff)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            observations = episode.get_observations(slice(1, None))  # what each step led to
            rewards = episode.get_rewards()
            new = []
            for obs, reward in zip(observations, rewards):
                obs = np.asarray(obs, dtype=np.float64).reshape(-1)
                if not self.buffer or min(np.linalg.norm(obs - b) for b in self.buffer) > self.threshold:
                    self.buffer.append(obs)
                    reward = reward + self.intrinsic_reward_coeff
                new.append(reward)
            episode.set_rewards(new_data=new, at_indices=slice(0, len(new)))
        return batch
