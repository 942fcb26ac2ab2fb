"""Small layers of old-API PyTorch models (RLlib's `ray.rllib.models.torch.misc`).

RLlib's path, `rlx.models.torch.misc`, is an alias of this module's names.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

__all__ = ["SlimFC", "normc_initializer", "AppendBiasLayer", "get_activation_fn", "same_padding", "valid_padding"]

_ACTIVATIONS: dict[Any, Callable[[], nn.Module] | None] = {
    "tanh": nn.Tanh, "relu": nn.ReLU, "swish": nn.SiLU, "silu": nn.SiLU, "elu": nn.ELU,
    "linear": None, None: None,
}


def get_activation_fn(name: Any = None, framework: str = "torch") -> Callable[[], nn.Module] | None:
    """The activation Module class for a name ("tanh", "relu", "swish", "elu", "linear"/None)."""
    if isinstance(name, type) and issubclass(name, nn.Module):
        return name
    key = name.lower() if isinstance(name, str) else name
    if key not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; use one of tanh, relu, swish, silu, elu, linear or None.")
    return _ACTIVATIONS[key]


def normc_initializer(std: float = 1.0) -> Callable[[torch.Tensor], None]:
    """Initialise a weight [out, in] with normal rows scaled to norm `std` (RLlib's normc)."""
    def initializer(tensor: torch.Tensor) -> None:
        with torch.no_grad():
            tensor.normal_(0, 1)
            tensor.mul_(std / torch.sqrt(tensor.pow(2).sum(1, keepdim=True)))
    return initializer


def _pair(value: Any) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, (int, np.integer)) else (int(value[0]), int(value[1]))


def same_padding(in_size: Any, filter_size: Any, stride_size: Any) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """Padding for a "same" convolution and its output size: ((left, right, top, bottom), (out_h, out_w)).

    `in_size`, `filter_size`, `stride_size` are ints or (height, width) pairs; the output size is
    ceil(in / stride). The padding tuple fits torch.nn.ZeroPad2d.
    """
    (in_h, in_w), (k_h, k_w), (s_h, s_w) = _pair(in_size), _pair(filter_size), _pair(stride_size)
    out_h, out_w = -(-in_h // s_h), -(-in_w // s_w)
    pad_h = max((out_h - 1) * s_h + k_h - in_h, 0)
    pad_w = max((out_w - 1) * s_w + k_w - in_w, 0)
    return (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2), (out_h, out_w)


def valid_padding(in_size: Any, filter_size: Any, stride_size: Any) -> tuple[int, int]:
    """Output size (out_h, out_w) of a "valid" (unpadded) convolution."""
    (in_h, in_w), (k_h, k_w), (s_h, s_w) = _pair(in_size), _pair(filter_size), _pair(stride_size)
    return (in_h - k_h) // s_h + 1, (in_w - k_w) // s_w + 1


class SlimFC(nn.Module):
    """Linear layer with an initializer and an optional activation."""

    def __init__(self, in_size: int, out_size: int, initializer: Callable[[torch.Tensor], Any] | None = None,
                 activation_fn: Any = None, use_bias: bool = True, bias_init: float = 0.0):
        super().__init__()
        linear = nn.Linear(int(in_size), int(out_size), bias=use_bias)
        (initializer or nn.init.xavier_uniform_)(linear.weight)
        if use_bias:
            nn.init.constant_(linear.bias, bias_init)
        act = get_activation_fn(activation_fn)
        self._model = nn.Sequential(linear, act()) if act is not None else nn.Sequential(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return self._model(x)


class AppendBiasLayer(nn.Module):
    """Appends a learned vector (e.g. a free log-std) to its input."""

    def __init__(self, num_bias_vars: int):
        super().__init__()
        self.log_std = nn.Parameter(torch.as_tensor(np.zeros(int(num_bias_vars)), dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return torch.cat([x, self.log_std.unsqueeze(0).expand(x.shape[0], -1)], dim=1)
