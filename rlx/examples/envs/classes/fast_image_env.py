"""FastImageEnv: an image-observation env that costs almost nothing to step, for benchmarks.

RLlib's `ray.rllib.examples.envs.classes.fast_image_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["FastImageEnv"]


class FastImageEnv(gym.Env):
    """Always observes an all-zero (84, 84, 4) float32 image; reward 1, actions (Discrete(2)) ignored.

    Episodes end (terminated and truncated) after 1001 steps. The env config is ignored.
    """

    def __init__(self, config: dict | None = None):
        self.zeros = np.zeros((84, 84, 4), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(84, 84, 4), dtype=np.float32)
        self.i = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Observe the zero image."""
        self.i = 0
        return self.zeros, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Observe the zero image, reward 1."""
        self.i += 1
        done = self.i > 1000
        return self.zeros, 1.0, done, done, {}
