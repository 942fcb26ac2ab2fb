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
    """`x` (an array, or a nested dict/list/tuple of them) as torch tensors (float64 as float32;
    None leaves stay None). `pin_memory` pins CPU tensors (when CUDA is available) for faster,
    asynchronous copies to the GPU."""
    if isinstance(x, dict):
        return {k: convert_to_torch_tensor(v, device, pin_memory) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(convert_to_torch_tensor(v, device, pin_memory) for v in x)
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        tensor = x
    else:
        array = np.asarray(x)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if pin_memory and tensor.device.type == "cpu" and torch.cuda.is_available():
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=pin_memory) if device is not None else tensor


def explained_variance(y: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """1 - Var[y - pred] / Var[y], at least -1."""
    y_var = torch.var(y, dim=0)
    diff_var = torch.var(y - pred, dim=0)
    return torch.clamp(1.0 - diff_var / y_var, min=-1.0)


def _map_tensors(fn: Any, x: Any) -> Any:
    """`x` with `fn` applied to every torch.Tensor leaf of its dicts, lists and tuples."""
    if isinstance(x, dict):
        return {k: _map_tensors(fn, v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(fn, v) for v in x)
    return fn(x) if isinstance(x, torch.Tensor) else x


def copy_torch_tensors(x: Any, device: Any = None) -> Any:
    """A copy of every tensor in the (nested) structure `x`, detached from the graph (moved to
    `device` when given; the move is the copy); other leaves stay as they are."""
    if device is None:
        return _map_tensors(lambda t: t.detach().clone(), x)
    return _map_tensors(lambda t: t.detach().to(device), x)


def compute_global_norm(gradients_list: list) -> torch.Tensor:
    """The L2 norm over all (non-None) tensors of `gradients_list` together; inf/nan norms are
    replaced by large finite values so a clip coefficient stays usable."""
    norms = [torch.norm(g.detach(), 2.0).nan_to_num(neginf=-10e8, posinf=10e8) for g in gradients_list
             if g is not None]
    if not norms:
        return torch.tensor(0.0)
    return torch.norm(torch.stack(norms), 2.0).nan_to_num(neginf=-10e8, posinf=10e8)


def clip_gradients(gradients_dict: dict, *, grad_clip: float | None = None, grad_clip_by: str = "value") -> Any:
    """Clip the gradients of `gradients_dict` in place: each element to [-grad_clip, grad_clip]
    ("value"), each tensor's L2 norm to grad_clip ("norm"), or all tensors together so their
    global norm is at most grad_clip ("global_norm", which returns that norm before clipping).
    Returns None otherwise, and when grad_clip is None (no clipping)."""
    if grad_clip is None:
        return None
    if grad_clip_by not in ("value", "norm", "global_norm"):
        raise ValueError(f"grad_clip_by must be 'value', 'norm' or 'global_norm', got {grad_clip_by!r}.")
    if grad_clip_by == "value":
        for key, grad in gradients_dict.items():
            gradients_dict[key] = None if grad is None else torch.clip(grad, -grad_clip, grad_clip)
        return None
    if grad_clip_by == "norm":
        for grad in gradients_dict.values():
            if grad is not None:
                norm = grad.norm(2).nan_to_num(neginf=-10e8, posinf=10e8)
                if norm > grad_clip:
                    grad.mul_(grad_clip / norm)
        return None
    grads = list(gradients_dict.values())
    total = compute_global_norm(grads)
    # min(1, clip / norm) without a host sync: the clamp keeps small norms unscaled.
    coeff = torch.clamp(grad_clip / torch.clamp(total + 1e-6, min=grad_clip), max=1.0)
    for grad in grads:
        if grad is not None:
            grad.detach().mul_(coeff.to(grad.device))
    return total


def global_norm(tensors: list) -> torch.Tensor:
    """sqrt of the sum of squares of every element of every tensor in `tensors`."""
    return torch.sqrt(sum(torch.sum(torch.pow(t, 2.0)) for t in tensors))


def huber_loss(x: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Elementwise Huber loss: 0.5 * x^2 where |x| < delta, else delta * (|x| - 0.5 * delta)."""
    return torch.where(torch.abs(x) < delta, 0.5 * torch.pow(x, 2.0), delta * (torch.abs(x) - 0.5 * delta))


def l2_loss(x: torch.Tensor) -> torch.Tensor:
    """0.5 * the sum of squares of x."""
    return 0.5 * torch.sum(torch.pow(x, 2.0))


def reduce_mean_ignore_inf(x: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """The mean of x (over `axis`, or all elements) leaving out -inf entries."""
    mask = torch.ne(x, float("-inf"))
    kept = torch.where(mask, x, torch.zeros_like(x))
    if axis is None:
        return torch.sum(kept) / torch.sum(mask.float())
    return torch.sum(kept, axis) / torch.sum(mask.float(), axis)


def sequence_mask(lengths: torch.Tensor, maxlen: int | None = None, dtype: Any = None,
                  time_major: bool = False) -> torch.Tensor:
    """A [B, T] mask (T = maxlen, default the longest length) that is True where t < lengths[b];
    [T, B] when time_major; of `dtype` when given (default bool)."""
    if maxlen is None:
        maxlen = int(lengths.max())
    steps = torch.arange(int(maxlen), device=lengths.device)
    mask = steps[None, :] < lengths[:, None]
    if time_major:
        mask = mask.t()
    return mask if dtype is None else mask.to(dtype)


def update_target_network(main_net: torch.nn.Module, target_net: torch.nn.Module, tau: float) -> None:
    """Polyak-average `main_net`'s weights into `target_net`: target = tau * main + (1 - tau) * target."""
    main = main_net.state_dict()
    target_net.load_state_dict({k: tau * main[k] + (1.0 - tau) * v for k, v in target_net.state_dict().items()})


def set_torch_seed(seed: int | None = None) -> None:
    """Seed torch's CPU and CUDA generators and make cuDNN deterministic (nothing for None)."""
    if seed is None:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def softmax_cross_entropy_with_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The cross entropy of the label distributions and softmax(logits), over the last axis."""
    return torch.sum(-labels * torch.nn.functional.log_softmax(logits, -1), -1)


def symlog(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * log(|x| + 1) (DreamerV3's squashing)."""
    return torch.sign(x) * torch.log(torch.abs(x) + 1)


def inverse_symlog(y: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`symlog`: sign(y) * (exp(|y|) - 1)."""
    return torch.sign(y) * (torch.exp(torch.abs(y)) - 1)
