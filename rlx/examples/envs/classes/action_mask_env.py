"""ActionMaskEnv: a RandomEnv whose observations carry a mask of the actions allowed next.

RLlib's `ray.rllib.examples.envs.classes.action_mask_env`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box, Dict, Discrete

from rlx.examples.envs.classes.random_env import RandomEnv

__all__ = ["ActionMaskEnv"]


class ActionMaskEnv(RandomEnv):
    """A RandomEnv (same env config keys; `action_space` must be Discrete) with a masked action set.

    The observation space is `Dict({"action_mask": Box(0.0, 1.0, (n,)), "observations":
    <the configured observation_space>})`. Each observation's mask is random 0.0/1.0 values:
    an action whose mask entry is 0.0 is invalid, and `step()` raises ValueError on it.
    """

    def __init__(self, config: dict | None = None):
        super().__init__(config)
        if not isinstance(self.action_space, Discrete):
            raise ValueError(f"ActionMaskEnv needs a Discrete action_space, got {self.action_space}.")
        self.observation_space = Dict({
            "action_mask": Box(0.0, 1.0, shape=(int(self.action_space.n),), dtype=np.float32),
            "observations": self.observation_space,
        })
        if self.static_samples:
            self.observation_sample = self.observation_space.sample()
        self.valid_actions: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode; the first observation's mask says which actions are valid."""
        obs, info = super().reset(seed=seed, options=options)
        return self._fix_action_mask(obs), info

    def step(self, action: Any) -> tuple[dict, Any, bool, bool, dict]:
        """Raise ValueError on a masked-out action, else step the RandomEnv."""
        if not self.valid_actions[int(action)]:
            raise ValueError(f"Invalid action ({action}) sent to env! valid_actions={self.valid_actions}")
        obs, reward, terminated, truncated, info = super().step(action)
        return self._fix_action_mask(obs), reward, terminated, truncated, info

    def _fix_action_mask(self, obs: dict) -> dict:
        # Round the sampled mask: > 0.5 -> 1.0 (valid), else 0.0.
        self.valid_actions = np.round(obs["action_mask"]).astype(np.float32)
        obs["action_mask"] = self.valid_actions
        return obs
