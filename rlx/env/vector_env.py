"""A plain list of sub-environments stepped in lockstep by an EnvRunner."""
from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym


class VectorEnv(gym.vector.VectorEnv):
    """Holds `num_envs` sub-environments; `envs[i]` is the i-th one.

    The EnvRunner steps the sub-environments itself (so it can write straight into its
    preallocated buffers and reset each one the moment its episode ends); this class
    only groups them and answers questions about them. It is a `gymnasium.vector.VectorEnv`
    so that user code (callbacks) that checks for one finds it, but unlike gymnasium's its
    `observation_space` / `action_space` are those of one sub-env (as `single_*`).
    """

    def __init__(self, envs: list[Any]):
        if not envs:
            raise ValueError("A VectorEnv needs at least one sub-environment.")
        self.envs = envs
        self.num_envs = len(envs)
        self.observation_space: gym.Space = envs[0].observation_space
        self.action_space: gym.Space = envs[0].action_space
        self.single_observation_space: gym.Space = self.observation_space
        self.single_action_space: gym.Space = self.action_space
        self.metadata = dict(getattr(envs[0], "metadata", None) or {})
        self.render_mode = getattr(envs[0], "render_mode", None)

    def render(self) -> tuple[Any, ...]:
        """The rendered frame of every sub-env (gymnasium's VectorEnv.render)."""
        return tuple(e.render() for e in self.envs)

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

    def close(self, **kwargs: Any) -> None:
        """Close every sub-environment (gymnasium's keyword arguments are accepted and unused)."""
        for e in self.envs:
            close = getattr(e, "close", None)
            if close is not None:
                close()

    def __len__(self) -> int:
        return self.num_envs
