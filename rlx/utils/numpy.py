"""NumPy helpers of RLlib's `ray.rllib.utils.numpy` that user code imports."""
from __future__ import annotations

from typing import Any

import numpy as np

#: The smallest/largest float32 values (e.g. to mask logits).
FLOAT_MIN = float(np.finfo(np.float32).min)
FLOAT_MAX = float(np.finfo(np.float32).max)
LARGE_INTEGER = 100_000_000
SMALL_NUMBER = 1e-6
MIN_LOG_NN_OUTPUT = -5
MAX_LOG_NN_OUTPUT = 2


def softmax(x: Any, axis: int = -1, epsilon: float | None = None) -> np.ndarray:
    """Softmax of `x` along `axis` (values at least `epsilon` when given)."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    out = e / np.sum(e, axis=axis, keepdims=True)
    return np.maximum(out, epsilon) if epsilon is not None else out


def one_hot(x: Any, depth: int = 0, on_value: float = 1.0, off_value: float = 0.0,
            dtype: Any = np.float32) -> np.ndarray:
    """One-hot encoding of integer array `x` with `depth` classes (max(x) + 1 when 0)."""
    x = np.asarray(x, dtype=np.int64)
    depth = int(depth) if depth else int(x.max()) + 1
    out = np.full(x.shape + (depth,), off_value, dtype=dtype)
    np.put_along_axis(out, x[..., None], on_value, axis=-1)
    return out


def convert_to_numpy(x: Any, reduce_type: bool = True) -> Any:
    """`x` (a tensor, or a nested dict/list/tuple of them) with every torch tensor as a NumPy array."""
    if isinstance(x, dict):
        return {k: convert_to_numpy(v, reduce_type) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(convert_to_numpy(v, reduce_type) for v in x)
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu().numpy()
    if reduce_type and isinstance(x, np.ndarray):
        if x.dtype == np.float64:
            x = x.astype(np.float32)
        elif x.dtype == np.int64:
            x = x.astype(np.int32)
    return x
