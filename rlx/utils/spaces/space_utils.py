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


def convert_element_to_space_type(element: Any, sampled_element: Any) -> Any:
    """`element` with every leaf converted to the type of the matching leaf of `sampled_element`
    (a sample of the space): arrays take its dtype (Python numbers become 0-d arrays), integer
    leaves turn whole floats into ints. Used to make e.g. a restored action match its space."""

    def convert(leaf: Any, sample: Any) -> Any:
        if isinstance(sample, np.ndarray):
            if isinstance(leaf, np.ndarray):
                return leaf if leaf.dtype == sample.dtype else leaf.astype(sample.dtype)
            if isinstance(leaf, (int, float, np.number)) and sample.shape == ():
                return np.array(leaf, dtype=sample.dtype)
            raise ValueError(f"convert_element_to_space_type: expected an np.ndarray (or, for a 0-d sample, a "
                             f"number) matching the sample of shape {sample.shape}, got {type(leaf).__name__}.")
        if isinstance(sample, (int, np.integer)) and not isinstance(sample, bool):
            if isinstance(leaf, float) and leaf.is_integer():
                return int(leaf)
            if isinstance(leaf, np.floating):
                return np.int64(leaf)
        return leaf

    return _map(convert, element, sampled_element)


def get_dummy_batch_for_space(
    space: Any,
    batch_size: int = 32,
    *,
    fill_value: float | int | str = 0.0,
    time_size: int | None = None,
    time_major: bool = False,
    one_hot_discrete: bool = False,
) -> Any:
    """A batch of `batch_size` dummy values of `space` (nested like a Dict/Tuple space), filled
    with `fill_value` or, for "random", sampled. `batch_size=0` gives one unbatched value;
    `time_size` adds a time axis ([B, T, ...], or [T, B, ...] when time_major);
    `one_hot_discrete` gives Discrete/MultiDiscrete leaves as (zero-hot) float vectors."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        space = get_base_struct_from_space(space)
    if isinstance(space, (dict, tuple, list)):
        return _map(lambda leaf: get_dummy_batch_for_space(
            leaf, batch_size, fill_value=fill_value, time_size=time_size, time_major=time_major,
            one_hot_discrete=one_hot_discrete), space)
    if time_size is not None and (batch_size <= 0 or time_size <= 0):
        raise ValueError(f"get_dummy_batch_for_space: a time axis needs batch_size > 0 and time_size > 0, got "
                         f"batch_size={batch_size}, time_size={time_size}.")
    if one_hot_discrete and isinstance(space, gym.spaces.Discrete):
        space = gym.spaces.Box(0.0, 1.0, (int(space.n),), np.float32)
    elif one_hot_discrete and isinstance(space, gym.spaces.MultiDiscrete):
        space = gym.spaces.Box(0.0, 1.0, (int(np.sum(space.nvec)),), np.float32)
    lead: list[int] = []
    if time_size is not None:
        lead = [time_size, batch_size] if time_major else [batch_size, time_size]
    elif batch_size > 0:
        lead = [batch_size]
    if fill_value == "random":
        count = int(np.prod(lead)) if lead else 1
        samples = [space.sample() for _ in range(count)]
        if not lead:
            return np.asarray(samples[0], dtype=space.dtype)
        return np.asarray(samples, dtype=space.dtype).reshape(lead + list(space.shape))
    return np.full(lead + list(space.shape), fill_value, dtype=space.dtype)
