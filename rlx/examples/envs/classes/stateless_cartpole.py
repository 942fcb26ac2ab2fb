"""StatelessCartPole: CartPole without the velocities, so only a policy with memory can solve it.

RLlib's `ray.rllib.examples.envs.classes.stateless_cartpole`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.spaces import Box

__all__ = ["StatelessCartPole"]


class StatelessCartPole(CartPoleEnv):
    """Partially observable CartPole: observations are `[x-position, pole angle]` (float32).

    The cart velocity and the pole's angular velocity are left out, so a policy needs memory
    (an LSTM, frame stacking, ...) to balance the pole. Dynamics and rewards are CartPole's.
    The env config is accepted and ignored.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = Box(low=-high, high=high, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset CartPole; observe `[x, angle]`."""
        obs, info = super().reset(seed=seed, options=options)
        return self._strip(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Step CartPole; observe `[x, angle]`."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self._strip(obs), reward, terminated, truncated, info

    @staticmethod
    def _strip(obs: np.ndarray) -> np.ndarray:
        # CartPole's obs is [x, x-velocity, angle, angular velocity].
        return np.array([obs[0], obs[2]], dtype=np.float32)
