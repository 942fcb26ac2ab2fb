"""CartPoleWithLargeObservationSpace: CartPole whose observation hides among 100 random parts.

RLlib's `ray.rllib.examples.envs.classes.cartpole_with_large_observation_space`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

__all__ = ["CartPoleWithLargeObservationSpace"]

#: How many random Tuple entries the observation carries besides the real one.
NUM_NOISE_ENTRIES = 100


class CartPoleWithLargeObservationSpace(CartPoleEnv):
    """CartPole with a large Dict observation space::

        Dict({
            "0": Tuple((Discrete(100), Box(0, 256, (30,), float32))),   # random noise
            ...
            "99": Tuple((Discrete(100), Box(0, 256, (30,), float32))),  # random noise
            "actually-useful-stuff": Box(-4.8, 4.8, (4,), float32),     # CartPole's obs
        })

    The 100 noise entries are fresh samples every step. The env config is accepted and ignored.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        low, high = self.observation_space.low, self.observation_space.high
        spaces: dict[str, gym.Space] = {
            str(i): gym.spaces.Tuple((gym.spaces.Discrete(100), gym.spaces.Box(0, 256, (30,), np.float32)))
            for i in range(NUM_NOISE_ENTRIES)
        }
        spaces["actually-useful-stuff"] = gym.spaces.Box(low[0], high[0], (4,), np.float32)
        self.observation_space = gym.spaces.Dict(spaces)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset CartPole; a seed also seeds the noise."""
        obs, info = super().reset(seed=seed, options=options)
        if seed is not None:
            self.observation_space.seed(seed)
        return self._wrap(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Step CartPole; observe its obs plus fresh noise."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self._wrap(obs), reward, terminated, truncated, info

    def _wrap(self, obs: np.ndarray) -> dict:
        out = {str(i): self.observation_space[str(i)].sample() for i in range(NUM_NOISE_ENTRIES)}
        out["actually-useful-stuff"] = np.asarray(obs, np.float32)
        return out
