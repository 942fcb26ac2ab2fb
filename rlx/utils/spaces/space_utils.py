"""Helpers for gymnasium spaces and the nested structures of their samples (RLlib's
`ray.rllib.utils.spaces.space_utils`). Structures are dicts, tuples and lists of arrays."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def get_original_space(space: gym.Space) -> gym.Space:
    """The space a preprocessor flattened (`space.original_space`), else `space` itself."""
    return getattr(space, "original_space", space)


def is_composite_space(space: gym.Space) -> bool:
    """Whether `space` is a Dict or Tuple space."""
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def flatten_space(space: gym.Space) -> list[gym.Space]:
    """The leaf (non-Dict, non-Tuple) spaces of `space`, in order (Dict keys sorted, as gymnasium orders them)."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in flatten_space(sub)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in flatten_space(sub)]
    return [space]


def get_base_struct_from_space(space: gym.Space) -> Any:
    """`space` as a nested dict/tuple of its leaf spaces."""
    if isinstance(space, gym.spaces.Dict):
        return {k: get_base_struct_from_space(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(get_base_struct_from_space(s) for s in space.spaces)
    return space


def _map(fn: Any, *structs: Any) -> Any:
    first = structs[0]
    if isinstance(first, dict):
        return {k: _map(fn, *(s[k] for s in structs)) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(_map(fn, *items) for items in zip(*structs))
    return fn(*structs)


def _leaves(struct: Any) -> list[Any]:
    if isinstance(struct, dict):
        return [leaf for v in struct.values() for leaf in _leaves(v)]
    if isinstance(struct, (tuple, list)):
        return [leaf for v in struct for leaf in _leaves(v)]
    return [struct]


def batch(list_of_structs: list[Any], individual_items_already_have_batch_dim: bool = False) -> Any:
    """One structure whose leaves stack the leaves of `list_of_structs` along a new first axis
    (concatenate them when they already have one)."""
    if not list_of_structs:
        raise ValueError("batch() needs at least one structure.")
    join = np.concatenate if individual_items_already_have_batch_dim else np.stack
    return _map(lambda *leaves: join([np.asarray(x) for x in leaves]), *list_of_structs)


def unbatch(batches_struct: Any) -> list[Any]:
    """The list of structures that `batch()` joined (split along the first axis)."""
    leaves = _leaves(batches_struct)
    if not leaves:
        return []
    n = len(leaves[0])
    return [_map(lambda leaf, i=i: leaf[i], batches_struct) for i in range(n)]


def flatten_to_single_ndarray(input_: Any) -> np.ndarray:
    """All leaves of a nested structure, flattened and concatenated into one 1-D array."""
    leaves = _leaves(input_)
    if len(leaves) == 1 and not isinstance(input_, (dict, tuple, list)):
        return np.asarray(input_)
    return np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in leaves]).astype(np.float32)


def clip_action(action: Any, action_space: Any) -> Any:
    """`action` (nested as `action_space`, a space or its base struct) clipped into the Box bounds."""
    spaces = get_base_struct_from_space(action_space) if isinstance(action_space, gym.Space) else action_space

    def clip(a: Any, s: Any) -> Any:
        return np.clip(a, s.low, s.high) if isinstance(s, gym.spaces.Box) else a

    return _map(clip, action, spaces)


def unsquash_action(action: Any, action_space_struct: Any) -> Any:
    """`action` in [-1, 1] mapped to each Box's [low, high] (other leaves unchanged)."""
    spaces = get_base_struct_from_space(action_space_struct) if isinstance(action_space_struct, gym.Space) \
        else action_space_struct

    def unsquash(a: Any, s: Any) -> Any:
        if isinstance(s, gym.spaces.Box) and np.all(np.isfinite(s.low)) and np.all(np.isfinite(s.high)):
            out = s.low + (np.asarray(a) + 1.0) * (s.high - s.low) / 2.0
            return np.clip(out, s.low, s.high)
        return a

    return _map(unsquash, action, spaces)


def normalize_action(action: Any, action_space_struct: Any) -> Any:
    """The inverse of `unsquash_action`: Box leaves mapped from [low, high] to [-1, 1]."""
    spaces = get_base_struct_from_space(action_space_struct) if isinstance(action_space_struct, gym.Space) \
        else action_space_struct

    def normalize(a: Any, s: Any) -> Any:
        if isinstance(s, gym.spaces.Box) and np.all(np.isfinite(s.low)) and np.all(np.isfinite(s.high)):
            return (np.asarray(a) - s.low) * 2.0 / (s.high - s.low) - 1.0
        return a

    return _map(normalize, action, spaces)
