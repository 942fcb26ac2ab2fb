"""WindyMazeEnv: cross a maze by choosing when to let the wind carry you.

RLlib's `ray.rllib.examples.envs.classes.windy_maze_env` (the flat env; RLlib's
`HierarchicalWindyMazeEnv`, whose low-level agent ids change every high-level step and which
defines no spaces for them, is not provided).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["MAP_DATA", "WindyMazeEnv"]

#: The maze: start S, finish F, walls #.
MAP_DATA = """
#########
#S      #
####### #
      # #
      # #
####### #
#F      #
#########"""

#: Row/column change of the wind directions 0 north, 1 east, 2 south, 3 west.
_WIND = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}


class WindyMazeEnv(gym.Env):
    """Each step the wind blows in a random direction; the agent either stays (0) or moves with it (1).

    Observation: `(position, wind direction)`, a Tuple of Box(0, 100, (2,), float32) (row,
    column) and Discrete(4) (north, east, south, west). Reaching F gives 100 and terminates;
    other steps give 0. Episodes are truncated after 200 steps. The env config is ignored.
    """

    def __init__(self, env_config: dict | None = None):
        self.map = [row for row in MAP_DATA.split("\n") if row]
        self.x_dim = len(self.map)
        self.y_dim = len(self.map[0])
        cells = {ch: (x, y) for x, row in enumerate(self.map) for y, ch in enumerate(row)}
        self.start_pos = cells["S"]
        self.end_pos = cells["F"]
        self.observation_space = gym.spaces.Tuple((gym.spaces.Box(0, 100, shape=(2,), dtype=np.float32),
                                                   gym.spaces.Discrete(4)))
        self.action_space = gym.spaces.Discrete(2)
        self.pos = self.start_pos
        self.wind_direction = 0
        self.num_steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[tuple, dict]:
        """Go back to the start; draw the wind."""
        super().reset(seed=seed)
        self.wind_direction = int(self.np_random.integers(4))
        self.pos = self.start_pos
        self.num_steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[tuple, float, bool, bool, dict]:
        """Move with the wind (action 1) or stay (0); the wind changes."""
        if action == 1:
            self.pos = self._get_new_pos(self.pos, self.wind_direction)
        self.num_steps += 1
        self.wind_direction = int(self.np_random.integers(4))
        at_goal = self.pos == self.end_pos
        truncated = self.num_steps >= 200
        return self._obs(), 100.0 * at_goal, at_goal, truncated and not at_goal, {}

    def _get_new_pos(self, pos: tuple[int, int], direction: int) -> tuple[int, int]:
        dx, dy = _WIND[direction]
        x, y = pos[0] + dx, pos[1] + dy
        if 0 <= x < self.x_dim and 0 <= y < self.y_dim and self.map[x][y] != "#":
            return x, y
        return pos

    def _obs(self) -> tuple[np.ndarray, int]:
        return np.array(self.pos, np.float32), self.wind_direction
