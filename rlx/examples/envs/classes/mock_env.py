"""Mock envs with fixed episode lengths and rewards, for testing samplers.

RLlib's `ray.rllib.examples.envs.classes.mock_env` (the single envs; RLlib's VectorEnv-based
`VectorizedMockEnv` and `MockVectorEnv` are not provided).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["MockEnv", "MockEnv2", "MockEnv3"]


def _episode_length(value: int | dict) -> int:
    """The episode length, given directly or as the `episode_length` key of an env config."""
    if isinstance(value, dict):  # config.environment(MockEnv) passes the env config
        value = value.get("episode_length", 10)
    return int(value)


class MockEnv(gym.Env):
    """Observation 0 (Discrete(1)), reward 1.0, actions (Discrete(2)) ignored.

    Episodes end (terminated and truncated) after `episode_length` steps.
    """

    def __init__(self, episode_length: int | dict, config: dict | None = None):
        self.episode_length = _episode_length(episode_length)
        self.config = config
        self.i = 0
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Observe 0."""
        self.i = 0
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Observe 0, reward 1.0."""
        self.i += 1
        done = self.i >= self.episode_length
        return 0, 1.0, done, done, {}


class MockEnv2(gym.Env):
    """Observes the timestep (Discrete(episode_length + 1)), reward 100.0, actions ignored.

    Episodes end (terminated and truncated) after `episode_length` steps. `render()` returns a
    random 300x400 RGB image; the last seed passed to `reset()` is kept in `rng_seed`.
    """

    metadata = {"render_modes": ["rgb_array"], "render.modes": ["rgb_array"]}
    render_mode: str | None = "rgb_array"

    def __init__(self, episode_length: int | dict):
        self.episode_length = _episode_length(episode_length)
        self.i = 0
        self.observation_space = gym.spaces.Discrete(self.episode_length + 1)
        self.action_space = gym.spaces.Discrete(2)
        self.rng_seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Observe timestep 0; remember the seed."""
        self.i = 0
        if seed is not None:
            self.rng_seed = seed
        return self.i, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Observe the next timestep, reward 100.0."""
        self.i += 1
        done = self.i >= self.episode_length
        return self.i, 100.0, done, done, {}

    def render(self) -> np.ndarray:
        """A random RGB image of shape (300, 400, 3)."""
        return np.random.randint(0, 256, size=(300, 400, 3), dtype=np.uint8)


class MockEnv3(gym.Env):
    """Observes the timestep (Discrete(100)) and is rewarded the timestep; actions ignored.

    Infos carry `{"timestep": t}`. Episodes end (terminated and truncated) after
    `episode_length` steps.
    """

    def __init__(self, episode_length: int | dict):
        self.episode_length = _episode_length(episode_length)
        self.i = 0
        self.observation_space = gym.spaces.Discrete(100)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Observe timestep 0."""
        self.i = 0
        return self.i, {"timestep": 0}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """Observe the next timestep t and reward t."""
        self.i += 1
        done = self.i >= self.episode_length
        return self.i, float(self.i), done, done, {"timestep": self.i}
