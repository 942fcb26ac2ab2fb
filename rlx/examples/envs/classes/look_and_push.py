"""LookAndPush: a small env whose best actions depend on a state seen earlier (needs memory).

RLlib's `ray.rllib.examples.envs.classes.look_and_push`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["LookAndPush", "OneHot"]


class LookAndPush(gym.Env):
    """States 0..4 (Discrete(5)), actions Discrete(2); episodes start in state 2 with a hidden case.

    From state 2, action 0 reveals the hidden case: the next state is the case (0 or 1). From
    states 0 and 1, action 1 jumps back to 2; action 1 moves 2 -> 3 -> 4. In state 4 the
    episode ends: action 1 gives +10 if the hidden case is 1, anything else gives -10 (RLlib's
    rule). Every other step gives -1. The env config is accepted and ignored.
    """

    def __init__(self, config: dict | None = None):
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Discrete(5)
        self._state = 2
        self._case = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Start in state 2 with a random hidden case (0 or 1)."""
        super().reset(seed=seed)
        self._state = 2
        self._case = int(self.np_random.integers(2))
        return self._state, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Look (action 0 in state 2), push on (action 1), or answer in state 4."""
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} not in {self.action_space}")
        if self._state == 4:
            reward = 10.0 if action and self._case else -10.0
            return self._state, reward, True, False, {}
        if action:
            self._state = 2 if self._state == 0 else self._state + 1
        elif self._state == 2:
            self._state = self._case
        return self._state, -1.0, False, False, {}


class OneHot(gym.Wrapper):
    """One-hot encodes a Discrete observation as a float32 Box(0.0, 1.0, (n,))."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (env.observation_space.n,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset the env; encode its observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._encode_obs(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict]:
        """Step the env; encode its observation."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._encode_obs(obs), reward, terminated, truncated, info

    def _encode_obs(self, obs: int) -> np.ndarray:
        one_hot = np.zeros(self.env.observation_space.n, np.float32)
        one_hot[obs] = 1.0
        return one_hot
