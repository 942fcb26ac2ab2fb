"""CartPoleSparseRewards: CartPole that pays its whole return at the end of the episode.

RLlib's `ray.rllib.examples.envs.classes.cartpole_sparse_rewards`.
"""
from __future__ import annotations

from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["CartPoleSparseRewards"]


class CartPoleSparseRewards(gym.Env):
    """CartPole-v1 whose reward is 0 until the pole falls, then the accumulated return.

    Observations are `{"obs": CartPole's obs, "action_mask": [1, 1] (int8)}`. Note that a
    truncated episode (500 steps) pays 0. `get_state()`/`set_state()` copy and restore the
    env (for tree search). The env config is accepted and ignored.
    """

    def __init__(self, config: dict | None = None):
        self.env = gym.make("CartPole-v1")
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Dict({
            "obs": self.env.observation_space,
            "action_mask": gym.spaces.Box(low=0, high=1, shape=(2,), dtype=np.int8),
        })
        self.running_reward = 0.0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset CartPole and the running return."""
        self.running_reward = 0.0
        obs, info = self.env.reset(seed=seed, options=options)
        return self._obs(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Step CartPole; reward the running return if the pole fell, else 0."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.running_reward += reward
        return self._obs(obs), self.running_reward if terminated else 0.0, terminated, truncated, info

    def get_state(self) -> tuple[gym.Env, float]:
        """A copy of the env and the running return."""
        return deepcopy(self.env), self.running_reward

    def set_state(self, state: tuple[gym.Env, float]) -> dict:
        """Restore a `get_state()` result; returns the observation of that state."""
        self.env = deepcopy(state[0])
        self.running_reward = state[1]
        return self._obs(np.array(self.env.unwrapped.state, dtype=np.float32))

    @staticmethod
    def _obs(obs: np.ndarray) -> dict:
        return {"obs": obs, "action_mask": np.array([1, 1], dtype=np.int8)}
