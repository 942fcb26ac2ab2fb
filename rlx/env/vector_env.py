"""A plain list of sub-environments stepped in lockstep by an EnvRunner."""
from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym


class VectorEnv:
    """Holds `num_envs` sub-environments; `envs[i]` is the i-th one.

    The EnvRunner steps the sub-environments itself (so it can write straight into its
    preallocated buffers and reset each one the moment its episode ends); this class
    only groups them and answers questions about them.
    """

    def __init__(self, envs: list[Any]):
        if not envs:
            raise ValueError("A VectorEnv needs at least one sub-environment.")
        self.envs = envs
        self.num_envs = len(envs)
        self.observation_space: gym.Space = envs[0].observation_space
        self.action_space: gym.Space = envs[0].action_space

    def get_sub_environments(self) -> list[Any]:
        """The sub-environments (old API name)."""
        return self.envs

    @property
    def unwrapped(self) -> "VectorEnv":
        """This vector env itself, as gymnasium's VectorEnv.unwrapped is (`env.unwrapped.envs[0]`
        is the first sub-env)."""
        return self

    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """Apply `func` to every sub-environment and return the results."""
        return [func(e) for e in self.envs]

    def close(self) -> None:
        """Close every sub-environment."""
        for e in self.envs:
            close = getattr(e, "close", None)
            if close is not None:
                close()

    def __len__(self) -> int:
        return self.num_envs
