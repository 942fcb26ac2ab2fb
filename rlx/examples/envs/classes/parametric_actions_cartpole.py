"""CartPole with a large action set of which only two (randomly placed) actions are valid.

RLlib's `ray.rllib.examples.envs.classes.parametric_actions_cartpole`.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete

__all__ = ["ParametricActionsCartPole", "ParametricActionsCartPoleNoEmbeddings"]


def _max_avail_actions(value: int | dict) -> int:
    """The action count, given directly or as the `max_avail_actions` key of an env config."""
    if isinstance(value, dict):  # config.environment(<cls>) passes the env config
        value = value.get("max_avail_actions", 10)
    return int(value)


def _cartpole_step(wrapped: gym.Env, action: Any, left_idx: int, right_idx: int
                   ) -> tuple[np.ndarray, float, bool, bool, dict]:
    """Step CartPole with the real action (0 left, 1 right) that `action` stands for."""
    if action == left_idx:
        return wrapped.step(0)
    if action == right_idx:
        return wrapped.step(1)
    raise ValueError(f"Chosen action {action} was not one of the valid actions ({left_idx}, {right_idx}).")


class ParametricActionsCartPole(gym.Env):
    """CartPole-v1 with `max_avail_actions` actions, only two of which are valid at a time.

    Each step the two valid actions (LEFT and RIGHT) are moved to new random indices. The
    observation is a dict of

    - "action_mask": Box(0, 1, (n,), int8), 1 at the two valid indices;
    - "avail_actions": Box(-10, 10, (n, 2)), the 2-dim embedding of each action (LEFT's and
      RIGHT's fixed random embeddings at their indices, zeros elsewhere);
    - "cart": CartPole's observation.

    Any other action raises ValueError. The constructor takes `max_avail_actions` (or an env
    config with that key, default 10).
    """

    def __init__(self, max_avail_actions: int | dict):
        n = _max_avail_actions(max_avail_actions)
        self.left_action_embed = np.random.randn(2).astype(np.float32)
        self.right_action_embed = np.random.randn(2).astype(np.float32)
        self.action_space = Discrete(n)
        self.wrapped = gym.make("CartPole-v1")
        self.observation_space = Dict({
            "action_mask": Box(0, 1, shape=(n,), dtype=np.int8),
            "avail_actions": Box(-10, 10, shape=(n, 2), dtype=np.float32),
            "cart": self.wrapped.observation_space,
        })
        self.left_idx, self.right_idx = 0, 1
        self.action_assignments = np.zeros((n, 2), np.float32)
        self.action_mask = np.zeros(n, np.int8)

    def update_avail_actions(self) -> None:
        """Move LEFT and RIGHT to two new random indices."""
        n = int(self.action_space.n)
        self.left_idx, self.right_idx = (int(i) for i in self.np_random.choice(n, 2, replace=False))
        self.action_assignments = np.zeros((n, 2), np.float32)
        self.action_assignments[self.left_idx] = self.left_action_embed
        self.action_assignments[self.right_idx] = self.right_action_embed
        self.action_mask = np.zeros(n, np.int8)
        self.action_mask[[self.left_idx, self.right_idx]] = 1

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset CartPole and place the valid actions."""
        super().reset(seed=seed)
        self.update_avail_actions()
        obs, info = self.wrapped.reset(seed=seed, options=options)
        return self._obs(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Step CartPole with a valid action; move the valid actions."""
        obs, reward, terminated, truncated, info = _cartpole_step(self.wrapped, action, self.left_idx,
                                                                  self.right_idx)
        self.update_avail_actions()
        return self._obs(obs), reward, terminated, truncated, info

    def _obs(self, cart: np.ndarray) -> dict:
        return {"action_mask": self.action_mask, "avail_actions": self.action_assignments, "cart": cart}


class ParametricActionsCartPoleNoEmbeddings(gym.Env):
    """Like ParametricActionsCartPole, but the valid indices stay fixed and no embeddings are shown.

    The two valid actions are drawn once, at construction. The observation is a dict of
    "valid_avail_actions_mask" (Box(0, 1, (n,)), 1.0 at the two valid indices) and "cart"
    (CartPole's observation); a model is meant to learn the action embeddings itself.
    """

    def __init__(self, max_avail_actions: int | dict):
        n = _max_avail_actions(max_avail_actions)
        self.left_idx, self.right_idx = (int(i) for i in np.random.choice(n, 2, replace=False))
        self.valid_avail_actions_mask = np.zeros(n, np.float32)
        self.valid_avail_actions_mask[[self.left_idx, self.right_idx]] = 1.0
        self.action_space = Discrete(n)
        self.wrapped = gym.make("CartPole-v1")
        self.observation_space = Dict({
            "valid_avail_actions_mask": Box(0, 1, shape=(n,), dtype=np.float32),
            "cart": self.wrapped.observation_space,
        })

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset CartPole."""
        obs, info = self.wrapped.reset(seed=seed, options=options)
        return self._obs(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        """Step CartPole with a valid action."""
        obs, reward, terminated, truncated, info = _cartpole_step(self.wrapped, action, self.left_idx,
                                                                  self.right_idx)
        return self._obs(obs), reward, terminated, truncated, info

    def _obs(self, cart: np.ndarray) -> dict:
        return {"valid_avail_actions_mask": self.valid_avail_actions_mask, "cart": cart}
