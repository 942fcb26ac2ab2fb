"""TenStepErrorEnv: samples one episode fine, then fails, for testing env recreation.

RLlib's `ray.rllib.examples.envs.classes.ten_step_error_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["TenStepErrorEnv"]


class TenStepErrorEnv(gym.Env):
    """Random observations (Box(0, 1, (1,))), reward 0, Box(0, 1, (1,)) actions.

    The first episode terminates at its 10th step; in any later episode, the 10th step raises
    an Exception("Test error"), so an EnvRunner has to recreate the env. Infos carry
    `last_eps_errored` (whether the env had already served its good episode).
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        self.step_count = 0
        self.last_eps_errored = False
        self.observation_space = gym.spaces.Box(low=0.0, high=1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Box(low=0.0, high=1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode."""
        super().reset(seed=seed)
        self.step_count = 0
        return self.observation_space.sample(), {"last_eps_errored": self.last_eps_errored}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Step; the 10th step ends the first episode and raises in later ones."""
        self.step_count += 1
        if self.step_count == 10:
            if self.last_eps_errored:
                raise Exception("Test error")
            self.last_eps_errored = True
            return self.observation_space.sample(), 0.0, True, False, {"last_eps_errored": False}
        return self.observation_space.sample(), 0.0, False, False, {"last_eps_errored": self.last_eps_errored}
