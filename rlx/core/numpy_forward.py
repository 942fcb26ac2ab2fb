"""The forward pass of rlx's default MLPs in NumPy, for acting in the EnvRunner.

One observation row through a small torch MLP costs tens of microseconds of per-op dispatch
(more than the env step it decides); the same matrix products in NumPy cost a few. The
functions here read the torch parameters through zero-copy NumPy views, so they always see the
weights the Learner trains in place. They are built only for networks whose forward pass they
reproduce exactly: rlx's MLP class with its activations, float32 CPU parameters and no hooks
(but residency hooks, see `RESIDENCY_HOOK`).

`numpy_forward_of(module)` keeps one NumPy forward per module (its `numpy_inference_fn()`),
which `release_numpy_forward(module)` drops: the module cache (policy_map_capacity) does when it
swaps a module out, so no NumPy view keeps the swapped-out storage alive or reads it after the
swap, and the next use builds views of the storage the module has then.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, Sequence, cast

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


#: The attribute (True) of a forward pre-hook that only brings the module's tensors into memory
#: (the module cache's): it changes no result, so a NumPy forward may skip it as long as whoever
#: runs the NumPy forward makes the module resident first (ModuleSlot does, see its `resident`).
RESIDENCY_HOOK = "rlx_residency_hook"


def _has_hooks(module: torch.nn.Module) -> bool:
    """Whether a hook on `module` (or a submodule) could change its forward pass: any forward
    hook, and any forward pre-hook but residency hooks."""
    for m in module.modules():
        if m._forward_hooks:
            return True
        if any(not getattr(hook, RESIDENCY_HOOK, False) for hook in m._forward_pre_hooks.values()):
            return True
    return False


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
    for lin, act in zip(cast("Sequence[torch.nn.Linear]", mlp.linears), mlp._acts):  # built from `linears`
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


#: module -> [storage key, its NumPy forward or None]; see numpy_forward_entry.
_FORWARDS: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()


def _storage_key(module: Any) -> tuple[int, ...]:
    return tuple(p.data_ptr() for p in module.parameters())


def numpy_forward_entry(module: Any, check_storage: bool = False) -> list:
    """The entry `[storage key, forward]` kept for `module`, where `forward` is
    `module.numpy_inference_fn()` (None for a module without a NumPy forward), built once and kept
    until `release_numpy_forward(module)`, which also sets the entry's forward to None (so a
    caller that keeps the entry sees the release without a lookup), or, with `check_storage`,
    until a parameter of the module got new storage (e.g. `param.data = ...`)."""
    entry = _FORWARDS.get(module)
    if entry is not None and not (check_storage and entry[0] != _storage_key(module)):
        return entry
    if entry is not None:
        entry[1] = None
    forward = module.numpy_inference_fn() if hasattr(module, "numpy_inference_fn") else None
    entry = _FORWARDS[module] = [_storage_key(module), forward]
    return entry


def numpy_forward_of(module: Any, check_storage: bool = False) -> NumpyFn | None:
    """`module.numpy_inference_fn()`, kept as `numpy_forward_entry` says; None for a module
    without a NumPy forward."""
    return numpy_forward_entry(module, check_storage)[1]


def release_numpy_forward(module: Any) -> None:
    """Drop the NumPy forward kept for `module` (and with it its views of the module's weights)."""
    entry = _FORWARDS.pop(module, None)
    if entry is not None:
        entry[1] = None


def has_numpy_forward(module: Any) -> bool:
    """Whether a NumPy forward (views of `module`'s weights) is kept for `module`."""
    entry = _FORWARDS.get(module)
    return entry is not None and entry[1] is not None


def keeps_methods(obj: Any, owner: type, names: Iterable[str]) -> bool:
    """Whether `obj`'s class uses `owner`'s definitions of `names` (a subclass that overrides one
    of them computes something the NumPy form of `owner` does not know)."""
    cls = type(obj)
    return all(getattr(cls, name, None) is getattr(owner, name, None) for name in names)


def as_float32_rows(obs: np.ndarray) -> np.ndarray:
    """`obs` [B, ...] as a float32 [B, D] array (no copy when it already is one)."""
    obs = np.asarray(obs, dtype=np.float32)
    return obs.reshape(obs.shape[0], -1) if obs.ndim != 2 else obs
