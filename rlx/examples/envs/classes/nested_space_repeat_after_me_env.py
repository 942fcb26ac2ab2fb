"""NestedSpaceRepeatAfterMeEnv: repeat a (possibly nested Dict/Tuple) observation as the action.

RLlib's `ray.rllib.examples.envs.classes.nested_space_repeat_after_me_env`.
"""
from __future__ import annotations

from typing import Any, Iterator

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, Tuple

__all__ = ["NestedSpaceRepeatAfterMeEnv"]


def _leaves(space: gym.Space, value: Any) -> Iterator[tuple[gym.Space, Any]]:
    """(leaf space, leaf value) pairs of a value of a nested Dict/Tuple space, in space order."""
    if isinstance(space, Dict):
        for key, sub in space.spaces.items():
            yield from _leaves(sub, value[key])
    elif isinstance(space, Tuple):
        for sub, item in zip(space.spaces, value):
            yield from _leaves(sub, item)
    else:
        yield space, value


class NestedSpaceRepeatAfterMeEnv(gym.Env):
    """Each step, the action should equal the observation just seen; spaces may be nested.

    Env config keys: `space`, the observation space and (the same) action space (default
    `Tuple([Discrete(2), Dict({"a": Box(-1.0, 1.0, (2,))})])`), and `episode_len` (default
    100; the episode is truncated after that many steps). Observations are random samples of
    `space`. The reward sums, over the leaves of the space, +1.0 for each Discrete leaf matched
    exactly and `-sum(|action - obs|)` for each Box leaf.
    """

    def __init__(self, config: dict | None = None):
        config = config or {}
        self.observation_space = config.get(
            "space", Tuple([Discrete(2), Dict({"a": Box(-1.0, 1.0, (2,), np.float32)})]))
        self.action_space = self.observation_space
        self.episode_len = int(config.get("episode_len", 100))
        self.steps = 0
        self.current_obs: Any = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start an episode with a random observation (a seed also seeds the space)."""
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.steps = 0
        return self._next_obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Reward how well `action` repeats the last observation; observe a new one."""
        self.steps += 1
        reward = self.reward(action, self.current_obs)
        return self._next_obs(), reward, False, self.steps >= self.episode_len, {}

    def reward(self, action: Any, obs: Any) -> float:
        """+1.0 per matching Discrete leaf, minus the absolute differences of the Box leaves."""
        reward = 0.0
        for (space, a), (_, o) in zip(_leaves(self.action_space, action), _leaves(self.observation_space, obs)):
            if isinstance(space, Box):
                reward -= float(np.sum(np.abs(np.asarray(a) - np.asarray(o))))
            elif isinstance(space, Discrete):
                reward += 1.0 if int(a) == int(o) else 0.0
        return reward

    def _next_obs(self) -> Any:
        self.current_obs = self.observation_space.sample()
        return self.current_obs
