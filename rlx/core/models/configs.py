"""RLlib's model configs (`ray.rllib.core.models.configs`) for the fully connected parts users
build inside their own RLModules: `MLPHeadConfig` (tensor -> tensor) and `MLPEncoderConfig`
(batch dict -> {ENCODER_OUT: features}). `build(framework="torch")` returns a torch.nn.Module
made of rlx's MLP (rlx.core.mlp).

Layers are Linear, with `hidden_layer_activation` after each hidden layer and
`output_layer_activation` after the output layer (`output_layer_dim`; None: no output layer).
Weights and biases keep torch's default initialization unless an initializer (a torch.nn.init
function or its name, with `*_initializer_config` kwargs) is given. Layer normalization
(`hidden_layer_use_layernorm`) is not built: it raises NotSupportedYetError.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.mlp import MLP, resolve_initializer
from rlx.core.models.base import ENCODER_OUT
from rlx.utils.errors import ConfigError, NotSupportedYetError

__all__ = ["MLPEncoderConfig", "MLPHeadConfig"]


@dataclasses.dataclass
class MLPHeadConfig:
    """An MLP `input_dims[0] -> hidden_layer_dims -> output_layer_dim` (RLlib's MLPHeadConfig)."""

    input_dims: list[int] | tuple[int, ...] | None = None
    hidden_layer_dims: list[int] | tuple[int, ...] = (256, 256)
    hidden_layer_use_bias: bool = True
    hidden_layer_activation: str | None = "relu"
    hidden_layer_use_layernorm: bool = False
    hidden_layer_weights_initializer: str | Callable[..., Any] | None = None
    hidden_layer_weights_initializer_config: dict | None = None
    hidden_layer_bias_initializer: str | Callable[..., Any] | None = None
    hidden_layer_bias_initializer_config: dict | None = None
    output_layer_dim: int | None = None
    output_layer_use_bias: bool = True
    output_layer_activation: str | None = "linear"
    output_layer_weights_initializer: str | Callable[..., Any] | None = None
    output_layer_weights_initializer_config: dict | None = None
    output_layer_bias_initializer: str | Callable[..., Any] | None = None
    output_layer_bias_initializer_config: dict | None = None

    @property
    def output_dims(self) -> tuple[int]:
        """The width of the output: output_layer_dim, else the last hidden layer's (else the input's)."""
        if self.output_layer_dim is not None:
            return (int(self.output_layer_dim),)
        dims = list(self.hidden_layer_dims) or [self._input_dim()]
        return (int(dims[-1]),)

    def _input_dim(self) -> int:
        if not self.input_dims:
            raise ConfigError(f"{type(self).__name__} needs input_dims, e.g. input_dims=[4].")
        return int(np.prod(self.input_dims))

    def _check(self) -> None:
        if self.hidden_layer_use_layernorm:
            raise NotSupportedYetError(f"{type(self).__name__}(hidden_layer_use_layernorm=True)",
                                       "rlx's MLPs have no layer normalization",
                                       fix="Leave hidden_layer_use_layernorm=False, or build the network yourself.")

    def _mlp(self) -> MLP:
        self._check()
        linears: list[nn.Linear] = []
        activations: list[str | None] = []
        dim = self._input_dim()
        for width in self.hidden_layer_dims:
            linears.append(_linear(dim, int(width), self.hidden_layer_use_bias, self.hidden_layer_weights_initializer,
                                   self.hidden_layer_weights_initializer_config, self.hidden_layer_bias_initializer,
                                   self.hidden_layer_bias_initializer_config))
            activations.append(_activation(self.hidden_layer_activation))
            dim = int(width)
        if self.output_layer_dim is not None:
            linears.append(_linear(dim, int(self.output_layer_dim), self.output_layer_use_bias,
                                   self.output_layer_weights_initializer, self.output_layer_weights_initializer_config,
                                   self.output_layer_bias_initializer, self.output_layer_bias_initializer_config))
            activations.append(_activation(self.output_layer_activation))
        return MLP(linears, activations)

    def build(self, framework: str = "torch") -> nn.Module:
        """The head as a torch module: tensor [B, input] -> tensor [B, output]."""
        _check_framework(framework)
        return self._mlp()


@dataclasses.dataclass
class MLPEncoderConfig(MLPHeadConfig):
    """An MLP encoder (RLlib's MLPEncoderConfig): its module reads `batch[Columns.OBS]` and returns
    `{ENCODER_OUT: features}`. Without output_layer_dim the last hidden layer's output is the features."""

    output_layer_dim: int | None = None

    def build(self, framework: str = "torch") -> nn.Module:
        """The encoder as a torch module: batch dict -> {ENCODER_OUT: features}."""
        _check_framework(framework)
        return _MLPEncoder(self._mlp())


class _MLPEncoder(nn.Module):
    """An MLP over a batch's observations, returning its output under ENCODER_OUT."""

    def __init__(self, net: MLP):
        super().__init__()
        self.net = net

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        obs = torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)
        return {ENCODER_OUT: self.net(obs.reshape(obs.shape[0], -1))}


def _activation(name: str | None) -> str | None:
    key = None if name in (None, "linear") else str(name).lower()
    if key not in (None, "relu", "tanh", "swish", "silu", "elu"):
        raise NotSupportedYetError(f"activation {name!r}", "rlx's MLPs use relu, tanh, swish/silu, elu or linear")
    return key


def _linear(in_dim: int, out_dim: int, use_bias: bool, weights_init: Any, weights_kwargs: dict | None,
            bias_init: Any, bias_kwargs: dict | None) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim, bias=bool(use_bias))
    init = resolve_initializer(weights_init)
    if init is not None:
        init(layer.weight, **(weights_kwargs or {}))
    init = resolve_initializer(bias_init)
    if init is not None and layer.bias is not None:
        init(layer.bias, **(bias_kwargs or {}))
    return layer


def _check_framework(framework: str) -> None:
    if framework != "torch":
        raise NotSupportedYetError(f"build(framework={framework!r})", "rlx is PyTorch-only",
                                   fix='Use build(framework="torch").')
