"""DefaultModelConfig: the new API stack's typed model settings (`config.rl_module(model_config=...)`).

Its fields and defaults are RLlib's. rlx turns it into its model dict (`head_fcnet_*` are the
old `post_fcnet_*`); fields of features rlx does not build yet (initializers of conv, head and LSTM layers, layer
norm, the fusion net of Dict observations) accept only their defaults.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from rlx.utils.errors import NotSupportedYetError

#: DefaultModelConfig fields that are rlx model-dict keys of the same name.
_SAME_NAME = ("fcnet_hiddens", "fcnet_activation", "conv_filters", "conv_activation", "free_log_std",
              "log_std_clip_param", "vf_share_layers", "use_lstm", "max_seq_len", "lstm_cell_size",
              "lstm_use_prev_action", "lstm_use_prev_reward", "fcnet_kernel_initializer",
              "fcnet_kernel_initializer_kwargs", "fcnet_bias_initializer", "fcnet_bias_initializer_kwargs")
_RENAMED = {"head_fcnet_hiddens": "post_fcnet_hiddens", "head_fcnet_activation": "post_fcnet_activation"}


@dataclass
class DefaultModelConfig:
    """Settings of the default RLModules' networks (RLlib's `DefaultModelConfig`)."""

    fcnet_hiddens: list[int] = field(default_factory=lambda: [256, 256])
    fcnet_activation: str = "tanh"
    fcnet_kernel_initializer: str | Callable | None = None
    fcnet_kernel_initializer_kwargs: dict | None = None
    fcnet_bias_initializer: str | Callable | None = None
    fcnet_bias_initializer_kwargs: dict | None = None
    fcnet_use_layernorm: bool = False
    conv_filters: list | None = None
    conv_activation: str = "relu"
    conv_kernel_initializer: str | Callable | None = None
    conv_kernel_initializer_kwargs: dict | None = None
    conv_bias_initializer: str | Callable | None = None
    conv_bias_initializer_kwargs: dict | None = None
    head_fcnet_hiddens: list[int] = field(default_factory=list)
    head_fcnet_activation: str = "relu"
    head_fcnet_kernel_initializer: str | Callable | None = None
    head_fcnet_kernel_initializer_kwargs: dict | None = None
    head_fcnet_bias_initializer: str | Callable | None = None
    head_fcnet_bias_initializer_kwargs: dict | None = None
    head_fcnet_use_layernorm: bool = False
    free_log_std: bool = False
    log_std_clip_param: float = 20.0
    vf_share_layers: bool = True
    use_lstm: bool = False
    max_seq_len: int = 20
    lstm_cell_size: int = 256
    lstm_use_prev_action: bool = False
    lstm_use_prev_reward: bool = False
    lstm_kernel_initializer: str | Callable | None = None
    lstm_kernel_initializer_kwargs: dict | None = None
    lstm_bias_initializer: str | Callable | None = None
    lstm_bias_initializer_kwargs: dict | None = None
    fusionnet_hiddens: list[int] = field(default_factory=lambda: [256, 256])
    fusionnet_activation: str = "tanh"
    fusionnet_kernel_initializer: str | Callable | None = None
    fusionnet_kernel_initializer_kwargs: dict | None = None
    fusionnet_bias_initializer: str | Callable | None = None
    fusionnet_bias_initializer_kwargs: dict | None = None


def model_dict(config: DefaultModelConfig) -> dict[str, Any]:
    """The rlx model dict of a DefaultModelConfig; NotSupportedYetError naming a field of a feature
    rlx does not build yet that is not at its default."""
    defaults = DefaultModelConfig()
    out = {name: getattr(config, name) for name in _SAME_NAME}
    for name, key in _RENAMED.items():
        out[key] = getattr(config, name)
    for f in dataclasses.fields(config):
        if f.name in _SAME_NAME or f.name in _RENAMED:
            continue
        if getattr(config, f.name) != getattr(defaults, f.name):
            raise NotSupportedYetError(f"DefaultModelConfig.{f.name}",
                                       "initializers other than fcnet_*, layer norm and the Dict-observation fusion net")
    if out["conv_filters"] is None:
        del out["conv_filters"]
    return out
