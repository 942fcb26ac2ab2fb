"""Torch helpers of RLlib's `ray.rllib.utils.torch_utils` that user code imports."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: The smallest/largest float32 values (e.g. to mask logits).
FLOAT_MIN = float(torch.finfo(torch.float32).min)
FLOAT_MAX = float(torch.finfo(torch.float32).max)


def one_hot(x: torch.Tensor, space: Any) -> torch.Tensor:
    """One-hot float encoding of `x` for a Discrete (or MultiDiscrete, concatenated) space."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return torch.nn.functional.one_hot(x.long(), int(space.n)).float()
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).ravel()
        flat = x.long().reshape(x.shape[0], -1)
        return torch.cat([torch.nn.functional.one_hot(flat[:, i], int(n)).float() for i, n in enumerate(nvec)], -1)
    raise ValueError(f"one_hot needs a Discrete or MultiDiscrete space, got {space}.")


def convert_to_torch_tensor(x: Any, device: Any = None, pin_memory: bool = False) -> Any:
    """`x` (an array, or a nested dict/list/tuple of them) as torch tensors (float64 as float32)."""
    if isinstance(x, dict):
        return {k: convert_to_torch_tensor(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(convert_to_torch_tensor(v, device) for v in x)
    if isinstance(x, torch.Tensor):
        tensor = x
    else:
        array = np.asarray(x)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.to(device) if device is not None else tensor


def explained_variance(y: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """1 - Var[y - pred] / Var[y], at least -1."""
    y_var = torch.var(y, dim=0)
    diff_var = torch.var(y - pred, dim=0)
    return torch.clamp(1.0 - diff_var / y_var, min=-1.0)
