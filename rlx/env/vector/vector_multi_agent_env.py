"""VectorMultiAgentEnv: the interface of `num_envs` MultiAgentEnvs stepped together.

The multi-agent counterpart of `gymnasium.vector.VectorEnv`. Because agents come and go
within an episode, the batch is not stacked into arrays: `reset()` returns
`(observations, infos)` and `step(actions)` returns `(observations, rewards,
terminateds, truncateds, infos)`, each a sequence of `num_envs` per-agent dicts (the
terminated and truncated dicts carry the `"__all__"` key, as a MultiAgentEnv's do).
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

#: What a vector multi-agent env returns per field: one per-agent dict per sub-env.
ArrayType = Sequence[dict]

__all__ = ["ArrayType", "VectorMultiAgentEnv"]


class VectorMultiAgentEnv:
    """Base class of vectorized multi-agent envs (RLlib's `VectorMultiAgentEnv`).

    Subclasses set `envs`, `num_envs` and the spaces, and implement `step()` (and
    `render()`); `close()` calls `close_extras()` once.

    Attributes:
        envs: the sub-environments (MultiAgentEnvs), when the subclass holds them.
        num_envs: how many sub-environments are stepped together.
        single_observation_spaces / single_action_spaces: {agent_id: space} of one sub-env.
        single_observation_space / single_action_space: the same as gymnasium Dict spaces.
    """

    metadata: dict[str, Any] = {}
    spec: Any = None
    render_mode: str | None = None
    closed: bool = False

    envs: list | None = None
    num_envs: int = 0

    single_observation_spaces: dict[Any, gym.Space] | None = None
    single_action_spaces: dict[Any, gym.Space] | None = None
    single_observation_space: gym.spaces.Dict | None = None
    single_action_space: gym.spaces.Dict | None = None

    # Old API stack names (a multi-agent env's spaces as one Dict space).
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None

    _np_random: np.random.Generator | None = None
    _np_random_seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[ArrayType, ArrayType]:
        """Reset every sub-env; returns `(observations, infos)`, one dict per sub-env.

        The base class only seeds its own random generator; subclasses reset the envs.
        """
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        return [], []

    def step(self, actions: Sequence[dict]) -> tuple[ArrayType, ArrayType, ArrayType, ArrayType, ArrayType]:
        """Step every sub-env with its `{agent_id: action}` dict."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step().")

    def render(self) -> tuple[Any, ...] | None:
        """The rendered frame of every sub-env."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render().")

    def close(self, **kwargs: Any) -> None:
        """Close the sub-environments (once; later calls do nothing)."""
        if self.closed:
            return
        self.close_extras(**kwargs)
        self.closed = True

    def close_extras(self, **kwargs: Any) -> None:
        """What `close()` does beyond marking the env closed (override in subclasses)."""

    @property
    def np_random(self) -> np.random.Generator:
        """This vector env's own random generator (seeded from `reset(seed=...)`)."""
        if self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random()
        return self._np_random

    @property
    def unwrapped(self) -> "VectorMultiAgentEnv":
        """This env itself (`env.unwrapped.envs[0]` is the first sub-env)."""
        return self

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            try:
                self.close()
            except Exception:  # noqa: BLE001 - never raise from a finalizer
                pass

    def __repr__(self) -> str:
        if self.spec is None:
            return f"{type(self).__name__}(num_envs={self.num_envs})"
        return f"{type(self).__name__}({self.spec.id}, num_envs={self.num_envs})"
