"""SimpleCorridor: walk right down a corridor to its end.

RLlib's `ray.rllib.examples.envs.classes.simple_corridor`.
"""
from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["SimpleCorridor"]

logger = logging.getLogger(__name__)

#: The longest corridor the observation space allows.
MAX_CORRIDOR_LENGTH = 999


class SimpleCorridor(gym.Env):
    """A corridor of `corridor_length` cells (env config, default 10); the agent starts at 0.

    Actions: Discrete(2), 0 = step left (not past 0), 1 = step right. The observation is the
    position, Box(0.0, 999.0, (1,), float32). Reaching the end gives +1.0 and terminates; every
    other step gives -0.01.
    """

    def __init__(self, config: dict | None = None):
        config = config or {}
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, float(MAX_CORRIDOR_LENGTH), shape=(1,), dtype=np.float32)
        self.end_pos = 0.0
        self.set_corridor_length(config.get("corridor_length", 10))
        self._cur_pos = 0.0

    def set_corridor_length(self, length: int) -> None:
        """Change the corridor's length (at most 999), e.g. for curriculum learning."""
        if length > MAX_CORRIDOR_LENGTH:
            raise ValueError(f"The maximum `corridor_length` allowed is {MAX_CORRIDOR_LENGTH}, got {length}.")
        self.end_pos = length
        logger.info("Set corridor length to %s", self.end_pos)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Go back to position 0."""
        super().reset(seed=seed)
        self._cur_pos = 0.0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Move left (0) or right (1)."""
        if action not in (0, 1):
            raise ValueError(f"SimpleCorridor actions are 0 (left) and 1 (right), got {action!r}.")
        if action == 0 and self._cur_pos > 0:
            self._cur_pos -= 1.0
        elif action == 1:
            self._cur_pos += 1.0
        terminated = bool(self._cur_pos >= self.end_pos)
        return self._obs(), 1.0 if terminated else -0.01, terminated, False, {}

    def _obs(self) -> np.ndarray:
        return np.array([self._cur_pos], np.float32)
