"""CorrelatedActionsEnv: a one-step env that only an autoregressive action model solves well.

RLlib's `ray.rllib.examples.envs.classes.correlated_actions_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["CorrelatedActionsEnv"]


class CorrelatedActionsEnv(gym.Env):
    """Observe a number `obs` in [-1, 1]; answer with two actions that must fit together.

    The action is a Tuple of `a1` (Discrete(3)) and `a2` (Box(-2.0, 2.0, (1,))). The reward is
    `r1 + r2` with

    - `r1 = -|1 - (obs + a1)|`: how well a1 fits the observation, and
    - `r2 = -|obs + a1 + a2|`: how well a2 fits the observation AND the a1 chosen,

    so a2 must be sampled conditioned on a1. Every episode is one step long (terminated=True).
    The env config is accepted and ignored.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-2.0, 2.0, (1,), np.float32)))
        self.obs: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Draw a new observation uniformly from [-1, 1]."""
        super().reset(seed=seed, options=options)
        self.obs = self.np_random.uniform(-1.0, 1.0, size=(1,)).astype(np.float32)
        return self.obs, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Reward the action pair `(a1, a2)` and end the episode."""
        a1, a2 = action
        reward = self.reward(float(self.obs[0]), int(a1), float(np.asarray(a2).reshape(-1)[0]))
        return self.obs, reward, True, False, {}

    @staticmethod
    def reward(obs: float, a1: int, a2: float) -> float:
        """`-|1 - (obs + a1)| - |obs + a1 + a2|`."""
        return -abs(1.0 - (obs + a1)) - abs(obs + a1 + a2)
