"""StatelessPendulum: Pendulum without the angular velocity, so only a policy with memory can solve it.

RLlib's `ray.rllib.examples.envs.classes.stateless_pendulum`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.classic_control import PendulumEnv
from gymnasium.spaces import Box

__all__ = ["StatelessPendulum"]


class StatelessPendulum(PendulumEnv):
    """Partially observable Pendulum: observations are `[cos(theta), sin(theta)]` (float32).

    The angular velocity is left out. Env config key `g`: gravity (default 10.0). Dynamics and
    rewards are Pendulum's (no time limit: wrap it or set the algorithm's episode limit).
    """

    def __init__(self, config: dict | None = None):
        config = config or {}
        super().__init__(g=float(config.get("g", 10.0)))
        high = np.array([1.0, 1.0], dtype=np.float32)
        self.observation_space = Box(low=-high, high=high, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset Pendulum; observe `[cos(theta), sin(theta)]`."""
        obs, info = super().reset(seed=seed, options=options)
        return obs[:-1], info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Step Pendulum; observe `[cos(theta), sin(theta)]`."""
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[:-1], reward, terminated, truncated, info
