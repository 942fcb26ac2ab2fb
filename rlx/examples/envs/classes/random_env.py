"""RandomEnv: an env of any spaces whose observations and rewards are random samples.

RLlib's `ray.rllib.examples.envs.classes.random_env`. Also a multi-agent version and two
"pre-compiled" variants with a large (5000-dim) observation space.
"""
from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from rlx.env.multi_agent_env import make_multi_agent

__all__ = ["RandomEnv", "RandomMultiAgentEnv", "RandomLargeObsSpaceEnv", "RandomLargeObsSpaceEnvContActions"]


class RandomEnv(gym.Env):
    """An env that samples its observations and rewards from spaces and ends episodes at random.

    Env config keys (all optional):

    - `action_space` (default Discrete(2)) and `observation_space` (default Discrete(2)).
    - `reward_space`: rewards are samples of it (default Box(-1.0, 1.0, shape=()), float32).
    - `static_samples`: if True, one observation and one reward are sampled at construction
      and returned every time (default False).
    - `p_terminated` (old name `p_done`): the chance that each step terminates the episode
      (default 0.1).
    - `max_episode_len`: truncate the episode after this many steps (None or 0: no limit).
    - `check_action_bounds`: raise ValueError on an action outside `action_space`
      (default False). A Tuple action of the wrong length is always rejected.
    """

    def __init__(self, config: dict | None = None):
        config = config or {}
        self.action_space = config.get("action_space", gym.spaces.Discrete(2))
        self.observation_space = config.get("observation_space", gym.spaces.Discrete(2))
        self.reward_space = config.get("reward_space", gym.spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32))
        self.static_samples = bool(config.get("static_samples", False))
        if self.static_samples:
            self.observation_sample = self.observation_space.sample()
            self.reward_sample = self.reward_space.sample()
        p_terminated = config.get("p_terminated")
        self.p_terminated = float(config.get("p_done", 0.1) if p_terminated is None else p_terminated)
        self.max_episode_len = config.get("max_episode_len", None)
        self.check_action_bounds = bool(config.get("check_action_bounds", False))
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start an episode; a seed also seeds the observation and reward spaces."""
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
            self.reward_space.seed(seed + 1)
        self.steps = 0
        return self._observation(), {}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        """Check the action (if configured), then return a random observation and reward."""
        if self.check_action_bounds and not self.action_space.contains(action):
            raise ValueError(f"Illegal action for {self.action_space}: {action}")
        if isinstance(self.action_space, gym.spaces.Tuple) and len(action) != len(self.action_space.spaces):
            raise ValueError(f"Illegal action for {self.action_space}: {action}")
        self.steps += 1
        terminated = truncated = False
        if self.max_episode_len and self.steps >= self.max_episode_len:
            truncated = True
        elif self.p_terminated > 0.0:
            terminated = bool(self.np_random.random() < self.p_terminated)
        reward = copy.deepcopy(self.reward_sample) if self.static_samples else self.reward_space.sample()
        return self._observation(), _scalar(reward), terminated, truncated, {}

    def _observation(self) -> Any:
        if self.static_samples:
            return copy.deepcopy(self.observation_sample)
        return self.observation_space.sample()


def _scalar(reward: Any) -> Any:
    """A one-element reward sample as a Python float (other samples unchanged)."""
    arr = np.asarray(reward)
    return float(arr.reshape(())) if arr.size == 1 and arr.dtype.kind in "biuf" else reward


def _make_random_env(config: dict) -> RandomEnv:
    return RandomEnv(config)


class RandomMultiAgentEnv(make_multi_agent(_make_random_env)):
    """RandomEnv for `num_agents` agents (env config key, default 1); agent ids 0..num_agents-1.

    Every other env config key configures each agent's RandomEnv.
    """


class RandomLargeObsSpaceEnv(RandomEnv):
    """RandomEnv with a Box(-1.0, 1.0, (5000,)) observation space (other config keys as RandomEnv)."""

    def __init__(self, config: dict | None = None):
        config = dict(config or {})
        config["observation_space"] = gym.spaces.Box(-1.0, 1.0, (5000,), np.float32)
        super().__init__(config)


class RandomLargeObsSpaceEnvContActions(RandomEnv):
    """RandomEnv with a Box(-1.0, 1.0, (5000,)) observation and a Box(-1.0, 1.0, (5,)) action space."""

    def __init__(self, config: dict | None = None):
        config = dict(config or {})
        config["observation_space"] = gym.spaces.Box(-1.0, 1.0, (5000,), np.float32)
        config["action_space"] = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
        super().__init__(config)
