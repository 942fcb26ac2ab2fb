"""RepeatAfterMeEnv: repeat the observation seen `repeat_delay` steps ago.

RLlib's `ray.rllib.examples.envs.classes.repeat_after_me_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete

__all__ = ["RepeatAfterMeEnv"]


class RepeatAfterMeEnv(gym.Env):
    """Observations are random tokens; the action should be the token seen `repeat_delay` steps ago.

    Env config keys: `continuous` (Box(-1.0, 1.0, (2,)) tokens and actions instead of
    Discrete(2); default False), `repeat_delay` (default 1; 0 repeats the current obs) and
    `episode_len` (default 100). Discrete: +1.0 for the right token, -1.0 otherwise.
    Continuous: `-sum(|action - token|)`. Before the episode has `repeat_delay` tokens, the
    token to repeat is 0. The episode ends (terminated and truncated) after `episode_len` steps.
    """

    def __init__(self, config: dict | None = None):
        config = config or {}
        if config.get("continuous"):
            self.observation_space = Box(-1.0, 1.0, (2,), np.float32)
        else:
            self.observation_space = Discrete(2)
        self.action_space = self.observation_space
        self.delay = int(config.get("repeat_delay", 1))
        self.episode_len = int(config.get("episode_len", 100))
        self.history: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start an episode; the history starts with `repeat_delay` zero tokens."""
        super().reset(seed=seed)
        zero = np.zeros(2, np.float32) if isinstance(self.observation_space, Box) else 0
        self.history = [zero] * self.delay
        return self._next_obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Reward repeating the token from `repeat_delay` steps ago; observe a new token."""
        target = self.history[-(1 + self.delay)]
        if isinstance(self.action_space, Box):
            reward = -float(np.sum(np.abs(np.asarray(action) - target)))
        else:
            reward = 1.0 if int(action) == int(target) else -1.0
        done = len(self.history) > self.episode_len
        return self._next_obs(), reward, done, done, {}

    def _next_obs(self) -> Any:
        if isinstance(self.observation_space, Box):
            token: Any = self.np_random.random(2).astype(np.float32)
        else:
            token = int(self.np_random.integers(2))
        self.history.append(token)
        return token
