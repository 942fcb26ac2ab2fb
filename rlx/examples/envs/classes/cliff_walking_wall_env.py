"""CliffWalkingWallEnv: Gymnasium's CliffWalking with a wall instead of the cliff.

RLlib's `ray.rllib.examples.envs.classes.cliff_walking_wall_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["CliffWalkingWallEnv", "ACTION_UP", "ACTION_RIGHT", "ACTION_DOWN", "ACTION_LEFT"]

ACTION_UP = 0
ACTION_RIGHT = 1
ACTION_DOWN = 2
ACTION_LEFT = 3

_ROWS, _COLS = 4, 12
#: The start cell [3, 0] and the goal cell [3, 11] as observations (row * 12 + column).
START, GOAL = 36, 47


class CliffWalkingWallEnv(gym.Env):
    """A 4x12 grid; start at the bottom-left (obs 36), reach the bottom-right goal (obs 47).

    The bottom row between them (obs 37..46) is a wall: a move into a wall or off the grid
    leaves the agent where it is. Actions: Discrete(4), 0 up, 1 right, 2 down, 3 left.
    Observation: the cell index, Discrete(48). Each step gives -1; reaching the goal gives +10
    and terminates. The constructor's `seed` (default 42; or an env config with a "seed" key) seeds the
    spaces' samplers.
    """

    def __init__(self, seed: int | dict = 42) -> None:
        # config.environment(CliffWalkingWallEnv) passes the env config here (its "seed" key).
        if isinstance(seed, dict):
            seed = seed.get("seed", 42)
        self.observation_space = gym.spaces.Discrete(_ROWS * _COLS)
        self.action_space = gym.spaces.Discrete(4)
        self.observation_space.seed(seed)
        self.action_space.seed(seed)
        self.position = START

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Go back to the start cell."""
        super().reset(seed=seed)
        self.position = START
        return self.position, {}

    def step(self, action: Any) -> tuple[int, int, bool, bool, dict]:
        """Move one cell (walls and the grid's edges block)."""
        row, col = divmod(self.position, _COLS)
        if action == ACTION_UP:
            row = max(row - 1, 0)
        elif action == ACTION_RIGHT:
            if self.position != START:  # the wall is right of the start
                col = min(col + 1, _COLS - 1)
        elif action == ACTION_DOWN:
            if not 25 <= self.position <= 34:  # the wall is below these cells
                row = min(row + 1, _ROWS - 1)
        elif action == ACTION_LEFT:
            if self.position != GOAL:  # the wall is left of the goal
                col = max(col - 1, 0)
        else:
            raise ValueError(f"action {action} not in {self.action_space}")
        self.position = row * _COLS + col
        terminated = self.position == GOAL
        return self.position, 10 if terminated else -1, terminated, False, {}
