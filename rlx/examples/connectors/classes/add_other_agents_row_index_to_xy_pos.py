"""AddOtherAgentsRowIndexToXYPos: tell each agent of DoubleRowCorridorEnv which row the other is in."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.connectors.env_to_module.observation_preprocessor import MultiAgentObservationPreprocessor

#: The "other agent's row" value once that agent has left the episode.
_GONE = 2


class AddOtherAgentsRowIndexToXYPos(MultiAgentObservationPreprocessor):
    """For DoubleRowCorridorEnv's [row, column] observations, gives
    "agent_0" {"agent": row * length + column, "other_agent_row": row of agent_1 (2 once gone)}
    and "agent_1" [row, column, row of agent_0 (2 once gone)]."""

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        position = input_observation_space.spaces["agent_0"]
        self.corridor_length = int(position.high[1]) + 1
        return gym.spaces.Dict({
            "agent_0": gym.spaces.Dict({"agent": gym.spaces.Discrete(2 * self.corridor_length),
                                        "other_agent_row": gym.spaces.Discrete(3)}),
            "agent_1": gym.spaces.Box(0, max(self.corridor_length - 1, _GONE), (3,), np.float32),
        })

    def preprocess(self, observations: dict, episode: Any) -> dict:
        row_0 = int(observations["agent_0"][0]) if "agent_0" in observations else _GONE
        row_1 = int(observations["agent_1"][0]) if "agent_1" in observations else _GONE
        out = {}
        if "agent_0" in observations:
            row, col = (int(v) for v in observations["agent_0"][:2])
            out["agent_0"] = {"agent": row * self.corridor_length + col, "other_agent_row": row_1}
        if "agent_1" in observations:
            row, col = (float(v) for v in observations["agent_1"][:2])
            out["agent_1"] = np.array([row, col, row_0], dtype=np.float32)
        return out
