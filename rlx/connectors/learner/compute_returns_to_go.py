"""ComputeReturnsToGo: discounted returns from each step to its episode stretch's end."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class ComputeReturnsToGo(ConnectorV2):
    """Adds RETURNS_TO_GO: sum_k gamma^k r_{t+k} to the end of each episode stretch in the batch.

    Args:
        gamma: discount factor.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 gamma: float = 0.99, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.gamma = float(gamma)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for sa_episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            rewards = np.asarray(sa_episode.get_rewards(), np.float32)
            out = np.zeros_like(rewards)
            running = 0.0
            for t in range(len(rewards) - 1, -1, -1):
                running = rewards[t] + self.gamma * running
                out[t] = running
            self.add_n_batch_items(batch, Columns.RETURNS_TO_GO, out, len(out), sa_episode)
        return batch
