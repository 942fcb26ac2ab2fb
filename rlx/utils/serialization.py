"""Serialising spaces, NumPy values and types to JSON-safe data (RLlib's `ray.rllib.utils.serialization`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.utils.checkpoints import space_from_dict as from_dict, space_to_dict as to_dict
from rlx.utils.registry import import_object


def convert_numpy_to_python_primitives(obj: Any) -> Any:
    """`obj` with NumPy scalars and arrays (also nested in dicts, lists and tuples) as Python values."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: convert_numpy_to_python_primitives(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(convert_numpy_to_python_primitives(v) for v in obj)
    return obj


def gym_space_to_dict(space: Any) -> dict:
    """A JSON-safe description of a gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary, Tuple, Dict)."""
    return to_dict(space)


def gym_space_from_dict(d: dict) -> Any:
    """The space `gym_space_to_dict` described."""
    return from_dict(d)


space_to_dict = gym_space_to_dict
space_from_dict = gym_space_from_dict


def serialize_type(type_: type | str) -> str:
    """A class or function as its import path 'package.module.Name' (strings pass through)."""
    if isinstance(type_, str):
        return type_
    return f"{type_.__module__}.{type_.__qualname__}"


def deserialize_type(module: str | type, error: bool = False) -> Any:
    """The object an import path names ('package.module.Name' or 'package.module:Name'); None when
    it cannot be imported, or an error with `error=True`. A type passes through."""
    if not isinstance(module, str):
        return module
    try:
        return import_object(module)
    except Exception:
        if error:
            raise
        return None
