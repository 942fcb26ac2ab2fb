"""The forward pass of rlx's default MLPs in NumPy, for acting in the EnvRunner.

One observation row through a small torch MLP costs tens of microseconds of per-op dispatch
(more than the env step it decides); the same matrix products in NumPy cost a few. The
functions here read the torch parameters through zero-copy NumPy views, so they always see the
weights the Learner trains in place. They are built only for networks whose forward pass they
reproduce exactly: rlx's MLP class with its activations, float32 CPU parameters and no hooks.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np
import torch

from rlx.core.mlp import MLP

NumpyFn = Callable[[np.ndarray], np.ndarray]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0.0, x, np.expm1(np.minimum(x, 0.0)))


def _numpy_activations() -> dict[Any, Callable[[np.ndarray], np.ndarray] | None]:
    import torch.nn.functional as F

    return {torch.tanh: _tanh, torch.relu: _relu, F.silu: _silu, F.elu: _elu, None: None}


def _has_hooks(module: torch.nn.Module) -> bool:
    return any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())


def _numpy_view(param: torch.Tensor) -> np.ndarray | None:
    if param.device.type != "cpu" or param.dtype != torch.float32:
        return None
    return param.detach().numpy()


def mlp_numpy_fn(mlp: Any) -> NumpyFn | None:
    """`mlp(x)` in NumPy for an rlx MLP (rlx.core.models.MLP, exactly), or None for any other
    network, an activation without a NumPy form, non-float32/non-CPU weights or forward hooks."""
    if type(mlp) is not MLP or _has_hooks(mlp):
        return None
    table = _numpy_activations()
    layers = []
    for lin, act in zip(mlp.linears, mlp._acts):
        if act not in table or lin.bias is None:
            return None
        weight, bias = _numpy_view(lin.weight), _numpy_view(lin.bias)
        if weight is None or bias is None:
            return None
        layers.append((weight.T, bias, table[act]))

    def forward(x: np.ndarray) -> np.ndarray:
        for weight_t, bias, act in layers:
            x = x @ weight_t
            x += bias
            if act is not None:
                x = act(x)
        return x

    return forward


def keeps_methods(obj: Any, owner: type, names: Iterable[str]) -> bool:
    """Whether `obj`'s class uses `owner`'s definitions of `names` (a subclass that overrides one
    of them computes something the NumPy form of `owner` does not know)."""
    cls = type(obj)
    return all(getattr(cls, name, None) is getattr(owner, name, None) for name in names)


def as_float32_rows(obs: np.ndarray) -> np.ndarray:
    """`obs` [B, ...] as a float32 [B, D] array (no copy when it already is one)."""
    obs = np.asarray(obs, dtype=np.float32)
    return obs.reshape(obs.shape[0], -1) if obs.ndim != 2 else obs
