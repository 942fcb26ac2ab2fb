"""SixRoomEnv: a grid world of six rooms joined by doors, and a hierarchical multi-agent version.

RLlib's `ray.rllib.examples.envs.classes.six_room_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.typing import MultiAgentDict

__all__ = ["MAPS", "SixRoomEnv", "HierarchicalSixRoomEnv"]

#: The built-in maps: "W" is a wall, "G" the goal; the agent starts at row 1, column 1.
MAPS = {
    "small": [
        "WWWWWWWWWWWWW",
        "W   W   W   W",
        "W       W   W",
        "W   W       W",
        "W WWWW WWWW W",
        "W   W   W   W",
        "W   W       W",
        "W       W  GW",
        "WWWWWWWWWWWWW",
    ],
    "medium": [
        "WWWWWWWWWWWWWWWWWWW",
        "W     W     W     W",
        "W           W     W",
        "W     W           W",
        "W WWWWWWW WWWWWWW W",
        "W     W     W     W",
        "W     W           W",
        "W           W    GW",
        "WWWWWWWWWWWWWWWWWWW",
    ],
    "large": [
        "WWWWWWWWWWWWWWWWWWWWWWWWW",
        "W       W       W       W",
        "W       W       W       W",
        "W               W       W",
        "W       W               W",
        "W       W       W       W",
        "WW WWWWWWWWW WWWWWWWWWW W",
        "W       W       W       W",
        "W       W               W",
        "W       W       W       W",
        "W               W       W",
        "W       W       W      GW",
        "WWWWWWWWWWWWWWWWWWWWWWWWW",
    ],
}

#: Row/column change of the actions 0 up, 1 down, 2 left, 3 right.
_MOVES = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}


def _map_from(config: dict) -> list[str]:
    return config.get("custom_map", MAPS.get(config.get("map"), MAPS["small"]))


class _Grid:
    """The agent's position on a map, moved by primitive actions; walls block."""

    def __init__(self, rows: list[str]):
        self.map = rows
        self.pos = (1, 1)

    @property
    def index(self) -> int:
        """The position as one number: row * number of columns + column."""
        return self.pos[0] * len(self.map[0]) + self.pos[1]

    def move(self, action: int) -> None:
        """Move one cell (0 up, 1 down, 2 left, 3 right) unless a wall is in the way."""
        dr, dc = _MOVES[int(action)]
        row, col = self.pos[0] + dr, self.pos[1] + dc
        if self.map[row][col] != "W":
            self.pos = (row, col)

    def at_goal(self) -> bool:
        """Whether the agent is on the goal cell."""
        return self.map[self.pos[0]][self.pos[1]] == "G"


class SixRoomEnv(gym.Env):
    """Six rooms (2x3) joined by doors; start in the upper-left room, reach the goal "G".

    Env config keys: `map` ("small" (default), "medium" or "large"), `custom_map` (a list of
    row strings, overrides `map`) and `time_limit` (default 50 steps, then truncated).
    Observation: the cell index (Discrete(rows * columns)). Actions: Discrete(4), 0 up,
    1 down, 2 left, 3 right (a move into a wall does nothing). Each step gives -0.01;
    reaching the goal gives +10.0 and terminates.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        config = config or {}
        self.map = _map_from(config)
        self.time_limit = int(config.get("time_limit", 50))
        self.observation_space = gym.spaces.Discrete(len(self.map) * len(self.map[0]))
        self.action_space = gym.spaces.Discrete(4)
        self._grid = _Grid(self.map)
        self._ts = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Go back to the start cell (row 1, column 1)."""
        super().reset(seed=seed)
        self._grid = _Grid(self.map)
        self._ts = 0
        return self._grid.index, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Move one cell."""
        self._grid.move(action)
        self._ts += 1
        if self._grid.at_goal():
            return self._grid.index, 10.0, True, False, {}
        return self._grid.index, -0.01, False, self._ts >= self.time_limit, {}


class HierarchicalSixRoomEnv(MultiAgentEnv):
    """SixRoomEnv played by a high-level agent that sets targets for low-level agents.

    Agents: "high_level_agent" and "low_level_agent_0" .. "low_level_agent_{n-1}" (env config
    `num_low_level_agents`, default 3). The high-level agent observes the cell index and acts
    with a Tuple (target cell, which low-level agent); it is rewarded `distance(current cell,
    target) / map diagonal - 1.0` for the choice (targets far away are better). The chosen
    low-level agent observes (current cell, target) and moves (Discrete(4)) until it reaches
    the target (+1.0 to both it and the high-level agent), runs out of `max_steps_low_level`
    steps (default 15; -0.01 to the high-level agent) or reaches the goal (+10.0 to the
    high-level agent, +1.0 to the low-level agent if the goal was its target; the episode
    terminates); control then returns to the high-level agent. Each low-level step gives it
    -0.01. The episode terminates after `time_limit` steps of either level (default 50).
    Env config keys `map` and `custom_map` as in SixRoomEnv.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        config = config or {}
        self.map = _map_from(config)
        self.max_steps_low_level = int(config.get("max_steps_low_level", 15))
        self.time_limit = int(config.get("time_limit", 50))
        self.num_low_level_agents = int(config.get("num_low_level_agents", 3))
        low_ids = [f"low_level_agent_{i}" for i in range(self.num_low_level_agents)]
        self.possible_agents = ["high_level_agent"] + low_ids
        self.agents = list(self.possible_agents)
        cells = gym.spaces.Discrete(len(self.map) * len(self.map[0]))
        self.observation_spaces = {"high_level_agent": cells}
        self.observation_spaces.update({aid: gym.spaces.Tuple((cells, cells)) for aid in low_ids})
        self.action_spaces = {
            "high_level_agent": gym.spaces.Tuple((cells, gym.spaces.Discrete(self.num_low_level_agents)))}
        self.action_spaces.update({aid: gym.spaces.Discrete(4) for aid in low_ids})
        self._grid = _Grid(self.map)
        self._ts = 0
        self._low_level_steps = 0
        self._target: int | None = None
        self._low_level_agent: str | None = None
        self._num_targets_reached = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start at row 1, column 1; the high-level agent acts first."""
        self._grid = _Grid(self.map)
        self._ts = self._low_level_steps = self._num_targets_reached = 0
        self._target = self._low_level_agent = None
        return {"high_level_agent": self._grid.index}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """A high-level step (choose target and low-level agent) or a low-level move."""
        self._ts += 1
        terminateds = {ALL_AGENTS: self._ts >= self.time_limit}
        truncateds = {ALL_AGENTS: False}
        if "high_level_agent" in action_dict:
            target, which = action_dict["high_level_agent"]
            self._target, self._low_level_agent = int(target), f"low_level_agent_{int(which)}"
            self._low_level_steps = 0
            reward = self.eucl_dist(self._grid.index, self._target, self.map) / \
                (len(self.map) ** 2 + len(self.map[0]) ** 2) ** 0.5 - 1.0
            obs = {self._low_level_agent: (self._grid.index, self._target)}
            return obs, {"high_level_agent": reward}, terminateds, truncateds, {}

        low = self._low_level_agent
        self._low_level_steps += 1
        self._grid.move(action_dict[low])
        if self._grid.at_goal():
            terminateds[ALL_AGENTS] = True
            rewards = {"high_level_agent": 10.0, low: float(self._grid.index == self._target)}
            return {"high_level_agent": self._grid.index}, rewards, terminateds, truncateds, {}
        if self._grid.index == self._target:
            self._num_targets_reached += 1
            rewards = {"high_level_agent": 1.0, low: 1.0}
            return {"high_level_agent": self._grid.index}, rewards, terminateds, truncateds, {}
        rewards = {low: -0.01}
        if self._low_level_steps >= self.max_steps_low_level:
            rewards["high_level_agent"] = -0.01
            return {"high_level_agent": self._grid.index}, rewards, terminateds, truncateds, {}
        return {low: (self._grid.index, self._target)}, rewards, terminateds, truncateds, {}

    @staticmethod
    def eucl_dist(pos1: int, pos2: int, rows: list[str]) -> float:
        """The Euclidean distance between two cell indices of the map `rows`."""
        r1, c1 = divmod(int(pos1), len(rows[0]))
        r2, c2 = divmod(int(pos2), len(rows[0]))
        return ((r1 - r2) ** 2 + (c1 - c2) ** 2) ** 0.5
