"""CartPoleWithDictObservationSpace: CartPole whose observation is a nested Dict/Tuple.

RLlib's `ray.rllib.examples.envs.classes.cartpole_with_dict_observation_space`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

__all__ = ["CartPoleWithDictObservationSpace"]


class CartPoleWithDictObservationSpace(CartPoleEnv):
    """CartPole with the same information spread over a nested observation space::

        Dict({
            "x-pos": Box(shape=(1,)),                       # cart position
            "angular-pos": Dict({
                "value": Box(shape=()),                     # pole angle
                "some_random_stuff": Discrete(3),           # noise, for testing
            }),
            "velocs": Tuple((Box(shape=(1,)), Box(shape=()))),  # cart and angular velocity
        })

    It exercises Dicts in Dicts, Tuples in Dicts and both (1,)- and ()-shaped Boxes. The env
    config is accepted and ignored.
    """

    def __init__(self, config: dict | None = None):
        super().__init__()
        low, high = self.observation_space.low, self.observation_space.high
        self.observation_space = gym.spaces.Dict({
            "x-pos": gym.spaces.Box(low[0], high[0], (1,), dtype=np.float32),
            "angular-pos": gym.spaces.Dict({
                "value": gym.spaces.Box(low[2], high[2], (), dtype=np.float32),
                "some_random_stuff": gym.spaces.Discrete(3),
            }),
            "velocs": gym.spaces.Tuple((
                gym.spaces.Box(low[1], high[1], (1,), dtype=np.float32),
                gym.spaces.Box(low[3], high[3], (), dtype=np.float32),
            )),
        })

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset CartPole; observe the nested dict."""
        obs, info = super().reset(seed=seed, options=options)
        return self._nest(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Step CartPole; observe the nested dict."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self._nest(obs), reward, terminated, truncated, info

    def _nest(self, obs: np.ndarray) -> dict:
        # CartPole's obs is [x, x-velocity, angle, angular velocity].
        return {
            "x-pos": np.array([obs[0]], np.float32),
            "angular-pos": {
                "value": np.array(obs[2], np.float32),
                "some_random_stuff": int(self.np_random.integers(3)),
            },
            "velocs": (np.array([obs[1]], np.float32), np.array(obs[3], np.float32)),
        }
