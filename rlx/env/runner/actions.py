"""Module actions to env actions and back: unsquash and clip Box actions, structured spaces.

Modules act in the batch's action layout (Box actions of 2+ dimensions and MultiBinary
actions flat; Tuple/Dict actions flat float32 rows, their parts concatenated); envs take
their space's layout. `ActionAdapter` converts between the two for one action space.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.core.distributions import (action_space_leaves, flat_action_size, flatten_action_parts,
                                   unflatten_action_parts)


class ActionAdapter:
    """Maps module actions to env actions: unsquash from [-1, 1] (normalize_actions) and clip."""

    def __init__(self, action_space: gym.Space, normalize: bool, clip: bool):
        self.space = action_space
        self.is_box = isinstance(action_space, gym.spaces.Box)
        self.is_discrete = isinstance(action_space, gym.spaces.Discrete)
        self.is_multi_binary = isinstance(action_space, gym.spaces.MultiBinary)
        #: The env's action shape (() for spaces without one, e.g. Tuple/Dict).
        self.env_shape: tuple[int, ...] = tuple(action_space.shape or ())
        self.discrete_start = int(action_space.start) if isinstance(action_space, gym.spaces.Discrete) else 0
        # Box actions of 2+ dimensions and MultiBinary actions travel flat through module and batch.
        self.reshape = isinstance(action_space, (gym.spaces.MultiBinary, gym.spaces.Box)) \
            and len(action_space.shape) > 1
        self.normalize = False
        self.clip = False
        if isinstance(action_space, gym.spaces.Box):
            finite = bool(np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high)))
            self.normalize = normalize and finite
            self.clip = clip or self.normalize
            self.low = action_space.low.astype(np.float64).reshape(-1)
            self.high = action_space.high.astype(np.float64).reshape(-1)
        # Shape (after [T, B]) and dtype of the batch's ACTIONS column.
        self.batch_shape: tuple = (int(np.prod(action_space.shape or ())),) if self.reshape \
            else tuple(action_space.shape or ())
        self.batch_dtype = np.int64 if isinstance(
            action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)) else np.float32
        #: Tuple/Dict spaces: module actions are flat float32 rows, the parts' components
        #: concatenated (see rlx.core.distributions.MultiDistribution); each part has its adapter.
        self.structured = isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict))
        if self.structured:
            leaves = action_space_leaves(action_space)
            self._parts = [ActionAdapter(leaf, normalize, clip) for leaf in leaves]
            sizes = [flat_action_size(leaf) for leaf in leaves]
            self._splits = np.cumsum(sizes)[:-1].tolist()
            self.batch_shape = (int(sum(sizes)),)

    def to_env(self, actions: np.ndarray) -> Any:
        """Env actions for a batch of module actions; a list for Discrete spaces (and a list of
        tuples/dicts for Tuple/Dict spaces)."""
        if self.structured:
            return self._structured_to_env(np.asarray(actions, dtype=np.float32))
        if self.is_discrete:
            if self.discrete_start:
                return (actions + self.discrete_start).tolist()
            return actions.tolist()
        if self.is_multi_binary:
            return np.asarray(actions).reshape((-1,) + self.env_shape).astype(self.space.dtype, copy=False)
        if not self.is_box:
            return actions
        out = actions
        if self.normalize:
            out = self.low + (out + 1.0) * 0.5 * (self.high - self.low)
        if self.clip:
            out = np.clip(out, self.low, self.high)
        if self.reshape:
            out = out.reshape((-1,) + self.env_shape)
        return out.astype(self.space.dtype, copy=False)

    def _structured_to_env(self, flat: np.ndarray) -> list[Any]:
        n = flat.shape[0]
        columns = []
        for part, col in zip(self._parts, np.split(flat.reshape(n, -1), self._splits, axis=1)):
            leaf = part.space
            if part.is_discrete:
                columns.append((np.rint(col[:, 0]).astype(np.int64) + part.discrete_start).tolist())
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                ints = np.rint(col).astype(np.int64).reshape((n,) + leaf.shape) + np.asarray(getattr(leaf, "start", 0))
                columns.append(ints.astype(leaf.dtype, copy=False))
            else:  # Box: unsquash/clip as for a Box action space
                columns.append(part.to_env(col.reshape((n,) + part.env_shape)))
        return [unflatten_action_parts(self.space, [c[i] for c in columns]) for i in range(n)]

    def from_env(self, env_actions: list[Any]) -> np.ndarray:
        """Flat module actions [n, D] of a list of a Tuple/Dict space's env actions: the inverse
        of `to_env` (normalized Box parts squashed back into [-1, 1])."""
        rows = np.zeros((len(env_actions),) + self.batch_shape, np.float32)
        for i, action in enumerate(env_actions):
            leaves = flatten_action_parts(self.space, action)
            rows[i] = np.concatenate([_part_from_env(part, leaf) for part, leaf in zip(self._parts, leaves)])
        return rows

    def sample_module_actions(self, n: int) -> np.ndarray:
        """`n` random actions (random_actions=True sampling) in the batch's form."""
        if self.structured:
            return self.from_env([self.space.sample() for _ in range(n)])
        actions = np.stack([self.space.sample() for _ in range(n)])
        if self.reshape:
            actions = actions.reshape((n,) + self.batch_shape)
        if self.normalize:  # module actions of normalized Box spaces live in [-1, 1]
            actions = 2.0 * (actions.reshape(n, -1) - self.low) / (self.high - self.low) - 1.0
            actions = actions.reshape((n,) + self.batch_shape)
        return actions.astype(self.batch_dtype, copy=False)


def _part_from_env(part: ActionAdapter, value: Any) -> np.ndarray:
    """One part's env action as its flat module-action components."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if part.is_discrete:
        return flat - part.discrete_start
    if isinstance(part.space, gym.spaces.MultiDiscrete):
        return flat - np.asarray(getattr(part.space, "start", 0), dtype=np.float64).reshape(-1)
    if part.normalize:
        low, high = part.low.reshape(-1), part.high.reshape(-1)
        return 2.0 * (flat - low) / (high - low) - 1.0
    return flat

