"""NumPy helpers of RLlib's `ray.rllib.utils.numpy` that user code imports."""
from __future__ import annotations

from types import MappingProxyType
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


def _as_array(x: Any) -> np.ndarray:
    """x as a NumPy array (a torch tensor is detached and moved to the CPU first)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def fc(x: Any, weights: Any, biases: Any = None, framework: str | None = None) -> np.ndarray:
    """The output x @ weights + biases of a dense layer. With framework="torch" a weight matrix
    stored as torch stores it ([out, in]) is transposed when x's width needs that."""
    x, weights = _as_array(x), _as_array(weights)
    if framework == "torch" and x.shape[1] != weights.shape[0] and x.shape[1] == weights.shape[1]:
        weights = weights.T
    return np.matmul(x, weights) + (0.0 if biases is None else _as_array(biases))


def huber_loss(x: Any, delta: float = 1.0) -> np.ndarray:
    """Elementwise Huber loss: 0.5 * x^2 where |x| < delta, else delta * (|x| - 0.5 * delta)."""
    x = np.asarray(x)
    return np.where(np.abs(x) < delta, 0.5 * np.square(x), delta * (np.abs(x) - 0.5 * delta))


def l2_loss(x: Any) -> float:
    """Half the sum of squares of x."""
    return float(np.sum(np.square(x)) / 2.0)


def relu(x: Any, alpha: float = 0.0) -> np.ndarray:
    """Leaky ReLU: x where x > 0, alpha * x elsewhere."""
    x = np.asarray(x)
    return np.maximum(x, x * alpha)


def sigmoid(x: Any, derivative: bool = False) -> np.ndarray:
    """The logistic function of x; with `derivative`, x * (1 - x) (x being a sigmoid output)."""
    x = np.asarray(x)
    return x * (1 - x) if derivative else 1.0 / (1.0 + np.exp(-x))


def one_hot_multidiscrete(x: Any, depths: list) -> np.ndarray:
    """The one-hot encodings of each component of a MultiDiscrete value (or batch [B, n]),
    concatenated along the last axis."""
    x = _as_array(x)
    columns = [x[i] if x.ndim == 1 else x[:, i] for i in range(len(depths))]
    return np.concatenate([one_hot(c, depth=int(n)) for c, n in zip(columns, depths)], axis=-1)


def make_action_immutable(obj: Any) -> Any:
    """obj made read-only: an array's write flag is cleared, a dict becomes a read-only mapping
    view; anything else is returned as it is."""
    if isinstance(obj, np.ndarray):
        obj.setflags(write=False)
        return obj
    if isinstance(obj, dict):
        return MappingProxyType(dict(obj))
    return obj
