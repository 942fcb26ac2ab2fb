"""Give an env with a Box action space a different action range.

RLlib's `ray.rllib.examples.envs.classes.transformed_action_space_env`.
"""
from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rlx.env.env_context import EnvContext
from rlx.utils.registry import make_env_creator

__all__ = ["ActionTransform", "transform_action_space", "TransformedActionPendulum"]


class ActionTransform(gym.ActionWrapper):
    """Rescale actions linearly from `[low, high]` (the wrapper's action space) to the env's range."""

    def __init__(self, env: gym.Env, low: Any, high: Any):
        super().__init__(env)
        self._low = low
        self._high = high
        inner = env.action_space
        self.action_space = type(inner)(low, high, inner.shape, inner.dtype)

    def action(self, action: Any) -> Any:
        """Map an action in `[low, high]` to the wrapped env's `[low, high]`."""
        inner = self.env.action_space
        scaled = (np.asarray(action) - self._low) / (self._high - self._low) * (inner.high - inner.low) + inner.low
        return scaled.astype(inner.dtype, copy=False)


class _TransformedActionSpaceCreator:
    """The creator `transform_action_space()` returns; a class so that it pickles by value."""

    def __init__(self, env_name_or_creator: str | Callable[[dict], gym.Env]):
        self.env_name_or_creator = env_name_or_creator

    def __call__(self, config: dict | None = None) -> gym.Env:
        """Create the inner env from the config (without low/high) and wrap it."""
        config = config if config is not None else {}
        rest = {k: v for k, v in dict(config).items() if k not in ("low", "high", "_low", "_high")}
        low = config.get("low", config.get("_low", -1.0))
        high = config.get("high", config.get("_high", 1.0))
        ctx = config.copy_with_overrides(rest) if isinstance(config, EnvContext) else EnvContext(rest)
        if isinstance(self.env_name_or_creator, str):
            inner_env = make_env_creator(self.env_name_or_creator)[0](ctx)
        else:
            inner_env = self.env_name_or_creator(ctx)
        return ActionTransform(inner_env, low, high)


def transform_action_space(env_name_or_creator: str | Callable[[dict], gym.Env]) -> Callable[[dict], gym.Env]:
    """An env creator `creator(config)` that wraps the env in `ActionTransform`.

    `env_name_or_creator` is a Gymnasium id (or a name `config.environment()` accepts) or a
    creator `fn(config) -> env`. The returned creator reads the new action range from the
    config keys `low` and `high` (default -1.0 and 1.0; RLlib's docs call them `_low`/`_high`,
    which work too) and passes the other keys on (for a Gymnasium id: to its constructor).
    Example: `transform_action_space("Pendulum-v1")({"low": -15.0}).action_space` is
    `Box(-15.0, 1.0, (1,), float32)`.
    """
    return _TransformedActionSpaceCreator(env_name_or_creator)


#: A creator of Pendulum-v1 with actions in [low, high] (config keys, default [-1.0, 1.0]).
TransformedActionPendulum = transform_action_space("Pendulum-v1")
