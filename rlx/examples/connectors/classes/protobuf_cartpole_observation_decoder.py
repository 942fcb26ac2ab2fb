"""ProtobufCartPoleObservationDecoder: turn protobuf-bytes CartPole observations into 4 floats."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.examples.envs.classes.cartpole_with_protobuf_observation_space import decode


class ProtobufCartPoleObservationDecoder(ConnectorV2):
    """Env-to-module piece for CartPoleWithProtobufObservationSpace: decodes each episode's latest
    observation into CartPole's [x, x_dot, theta, theta_dot] (Box of 4 float32)."""

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        return gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        for episode in self.single_agent_episode_iterator(episodes):
            episode.set_observations(at_indices=-1, new_data=decode(episode.get_observations(-1)))
        return batch
