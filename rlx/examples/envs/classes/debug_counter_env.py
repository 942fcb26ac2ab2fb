"""Counter envs whose observations are timestep counters, for debugging samplers.

RLlib's `ray.rllib.examples.envs.classes.debug_counter_env`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.utils.typing import MultiAgentDict

__all__ = ["DebugCounterEnv", "MultiAgentDebugCounterEnv"]


class DebugCounterEnv(gym.Env):
    """Observes the timestep counter, Box(0, 100, (1,), float32); actions (Discrete(2)) do nothing.

    The counter starts at `start_at_t` (env config, default 0); each step adds 1 and rewards
    `counter % 3`. Episodes are truncated after 15 steps.
    """

    def __init__(self, config: dict | None = None):
        config = config or {}
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0, 100, (1,), dtype=np.float32)
        self.start_at_t = int(config.get("start_at_t", 0))
        self.i = self.start_at_t

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Set the counter to `start_at_t`."""
        super().reset(seed=seed)
        self.i = self.start_at_t
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Count one step."""
        self.i += 1
        return self._obs(), float(self.i % 3), False, self.i >= 15 + self.start_at_t, {}

    def _obs(self) -> np.ndarray:
        return np.array([self.i], dtype=np.float32)


class MultiAgentDebugCounterEnv(MultiAgentEnv):
    """`num_agents` agents (env config, required; ids 0..n-1) that echo their actions and count steps.

    Agent i observes `[i, action[0], action[1], its timestep]` (Box(-inf, inf, (4,)); after
    reset `[i, 0, 0, 0]`); its actions are Box(-inf, inf, (2,)) (meant to be an episode id and
    an env id). Its reward is `its timestep % 3`. Agent i is truncated once its timestep exceeds
    `base_episode_len + i` (env config, default 103); the episode ends when all are.
    """

    def __init__(self, config: dict):
        super().__init__()
        n = int(config["num_agents"])
        self.base_episode_len = int(config.get("base_episode_len", 103))
        self.possible_agents = list(range(n))
        self.agents = list(self.possible_agents)
        self.observation_spaces = {aid: gym.spaces.Box(-np.inf, np.inf, (4,), np.float32) for aid in range(n)}
        self.action_spaces = {aid: gym.spaces.Box(-np.inf, np.inf, (2,), np.float32) for aid in range(n)}
        self.timesteps = [0] * n
        self.truncated_agents: set[int] = set()

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Every agent observes `[id, 0, 0, 0]`."""
        self.timesteps = [0] * len(self.possible_agents)
        self.truncated_agents = set()
        self.agents = list(self.possible_agents)
        return {i: np.array([i, 0.0, 0.0, 0.0], np.float32) for i in self.agents}, {}

    def step(self, action_dict: MultiAgentDict) -> tuple[MultiAgentDict, ...]:
        """Count a step for each agent that acted and echo its action."""
        obs, rewards, terminateds, truncateds = {}, {}, {}, {}
        for i, action in action_dict.items():
            self.timesteps[i] += 1
            obs[i] = np.array([i, action[0], action[1], self.timesteps[i]], np.float32)
            rewards[i] = float(self.timesteps[i] % 3)
            terminateds[i] = False
            truncateds[i] = self.timesteps[i] > self.base_episode_len + i
            if truncateds[i]:
                self.truncated_agents.add(i)
        self.agents = [i for i in self.possible_agents if i not in self.truncated_agents]
        terminateds[ALL_AGENTS] = False
        truncateds[ALL_AGENTS] = not self.agents
        return obs, rewards, terminateds, truncateds, {}
