"""DoubleRowCorridorEnv: two agents in a two-row corridor, each walking to the other's start.

RLlib's `ray.rllib.examples.envs.classes.multi_agent.double_row_corridor_env`.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.typing import AgentID, MultiAgentDict

__all__ = ["DoubleRowCorridorEnv"]

#: Row/column change of the actions 0 up, 1 down, 2 left, 3 right.
_MOVES = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}


class DoubleRowCorridorEnv(MultiAgentEnv):
    """A 2 x `length` grid (env config `length`, default 15) with agents "agent_0" and "agent_1".

    "agent_0" starts at row 0, column 0 and must reach row 0, column length-1; "agent_1"
    starts at row 1, column length-1 and must reach row 1, column 0::

        +---------------+
        |0              |
        |              1|
        +---------------+

    Each agent observes its own `[row, column]` (Box(0, length-1, (2,), int32)) and moves with
    Discrete(4): 0 up, 1 down, 2 left, 3 right (moves off the grid do nothing). Every step
    costs each active agent -0.1; reaching its goal gives +10 and terminates that agent. The
    first time both (still active) agents land on the same cell, each gets +5, so the best
    policies meet first. The episode ends when both agents have terminated.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        config = config or {}
        self.length = int(config.get("length", 15))
        self.possible_agents = ["agent_0", "agent_1"]
        self.agents = list(self.possible_agents)
        self._obs_spaces = gym.spaces.Box(0, self.length - 1, shape=(2,), dtype=np.int32)
        self._act_spaces = gym.spaces.Discrete(4)
        self.observation_spaces = {aid: self._obs_spaces for aid in self.possible_agents}
        self.action_spaces = {aid: self._act_spaces for aid in self.possible_agents}
        self.agent_pos: dict[str, list[int]] = {}
        self.goals: dict[str, list[int]] = {}
        self.terminateds: dict[str, bool] = {}
        self.collided = False

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Put both agents on their start cells."""
        gym.Env.reset(self, seed=seed)  # seeds self.np_random
        self.agent_pos = {"agent_0": [0, 0], "agent_1": [1, self.length - 1]}
        self.goals = {"agent_0": [0, self.length - 1], "agent_1": [1, 0]}
        self.terminateds = {aid: False for aid in self.agent_pos}
        self.collided = False
        self.agents = list(self.possible_agents)
        return self._get_obs(), {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Move the acting agents; reward meeting and reaching goals."""
        rewards = {aid: -0.1 for aid in self.agent_pos if not self.terminateds[aid]}
        for aid, action in action_dict.items():
            dr, dc = _MOVES[int(action)]
            row, col = self.agent_pos[aid]
            self.agent_pos[aid] = [min(max(row + dr, 0), 1), min(max(col + dc, 0), self.length - 1)]
        # Observe before the goal check, so an agent reaching its goal gets a last observation.
        obs = self._get_obs()
        if not any(self.terminateds.values()) and self.agent_pos["agent_0"] == self.agent_pos["agent_1"] \
                and not self.collided:
            rewards["agent_0"] += 5
            rewards["agent_1"] += 5
            self.collided = True
        for aid in self.agent_pos:
            if not self.terminateds[aid] and self.agent_pos[aid] == self.goals[aid]:
                rewards[aid] += 10
                self.terminateds[aid] = True
        self.agents = [aid for aid in self.possible_agents if not self.terminateds[aid]]
        terminateds = dict(self.terminateds)
        terminateds[ALL_AGENTS] = all(self.terminateds.values())
        return obs, rewards, terminateds, {}, {}

    def get_observation_space(self, agent_id: AgentID) -> gym.Space:
        """Box(0, length-1, (2,), int32), the same for both agents."""
        return self._obs_spaces

    def get_action_space(self, agent_id: AgentID) -> gym.Space:
        """Discrete(4), the same for both agents."""
        return self._act_spaces

    def _get_obs(self) -> MultiAgentDict:
        return {aid: np.array(pos, dtype=np.int32) for aid, pos in self.agent_pos.items()
                if not self.terminateds[aid]}
