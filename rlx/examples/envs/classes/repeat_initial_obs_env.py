"""RepeatInitialObsEnv: repeat the episode's first observation at every step.

RLlib's `ray.rllib.examples.envs.classes.repeat_initial_obs_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["RepeatInitialObsEnv"]


class RepeatInitialObsEnv(gym.Env):
    """The first observation is a random token (Discrete(2)); every later one is 0.

    Each step the action should be the first token: +1 if it is, -1 if not. The episode ends
    (terminated and truncated) after `episode_len` steps (default 100; an env config dict with
    an `episode_len` key works too), so the best return is `episode_len`.
    """

    def __init__(self, episode_len: int | dict = 100):
        if isinstance(episode_len, dict):  # config.environment(RepeatInitialObsEnv) passes the env config
            episode_len = episode_len.get("episode_len", 100)
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)
        self.episode_len = int(episode_len)
        self.token: int | None = None
        self.num_steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Draw the token to remember."""
        super().reset(seed=seed)
        self.token = int(self.np_random.integers(2))
        self.num_steps = 0
        return self.token, {}

    def step(self, action: Any) -> tuple[int, int, bool, bool, dict]:
        """+1 for repeating the first token, -1 otherwise; observe 0."""
        reward = 1 if action == self.token else -1
        self.num_steps += 1
        done = self.num_steps >= self.episode_len
        return 0, reward, done, done, {}
