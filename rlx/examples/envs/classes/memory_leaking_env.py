"""MemoryLeakingEnv: a RandomEnv that leaks a little memory each episode, for testing leak checks.

RLlib's `ray.rllib.examples.envs.classes.memory_leaking_env`.
"""
from __future__ import annotations

import uuid
from typing import Any

from rlx.examples.envs.classes.random_env import RandomEnv

__all__ = ["MemoryLeakingEnv"]


class MemoryLeakingEnv(RandomEnv):
    """A RandomEnv (same env config keys) that, at the 2nd step of each episode, adds an entry to
    a dict it never clears (`self._leak`)."""

    def __init__(self, config: dict | None = None):
        super().__init__(config)
        self._leak: dict[str, int] = {}
        self._steps_after_reset = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start an episode."""
        self._steps_after_reset = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        """Step the RandomEnv; leak once per episode."""
        self._steps_after_reset += 1
        if self._steps_after_reset == 2:
            self._leak[uuid.uuid4().hex.upper()] = 1
        return super().step(action)
