"""VisionNetwork: the old API's default conv model (RLlib's `ray.rllib.models.torch.visionnet`).

The default image model of `build_model_v2`, so it lives in the core; RLlib's path,
`rlx.models.torch.visionnet`, is an alias of it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.cnn import CNN, default_conv_filters
from rlx.core.models.v2.misc import SlimFC, normc_initializer
from rlx.core.models.v2.torch_modelv2 import TorchModelV2

__all__ = ["VisionNetwork"]


class VisionNetwork(TorchModelV2, nn.Module):
    """Conv layers (`conv_filters` or the default ones for the image size, `conv_activation`) and
    `post_fcnet_hiddens`, then a logits layer; the value branch shares the conv features with
    `vf_share_layers=True`, else it has a conv stack of its own. Images are [H, W, C]; uint8 ones are
    scaled to [0, 1]. With `num_outputs=None` (or 0) the model outputs its features.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        cfg = model_config or {}
        shape = tuple(obs_space.shape or ())
        filters = cfg.get("conv_filters") or default_conv_filters(shape)
        activation = cfg.get("conv_activation", "relu")
        scale = getattr(obs_space, "original_space", obs_space).dtype == np.uint8
        self._shape = shape
        self._convs = CNN(shape, filters, activation, scale_uint8=scale)
        post = list(cfg.get("post_fcnet_hiddens", []))
        post_act = cfg.get("post_fcnet_activation", "relu")
        self._post = self._mlp(self._convs.out_dim, post, post_act)
        features = post[-1] if post else self._convs.out_dim
        self._logits = SlimFC(features, num_outputs, normc_initializer(0.01), None) if num_outputs else None
        if not num_outputs:
            self.num_outputs = features
        self.vf_share_layers = bool(cfg.get("vf_share_layers", False))
        self._value_convs = None if self.vf_share_layers else CNN(shape, filters, activation, scale_uint8=scale)
        self._value_post = None if self.vf_share_layers else self._mlp(self._convs.out_dim, post, post_act)
        self._value_branch = SlimFC(features, 1, normc_initializer(0.01), None)
        self._features: torch.Tensor | None = None
        self._obs: torch.Tensor | None = None

    @staticmethod
    def _mlp(in_size: int, hiddens: list[int], activation: Any) -> nn.Sequential:
        layers: list[nn.Module] = []
        for size in hiddens:
            layers.append(SlimFC(in_size, size, normc_initializer(1.0), activation))
            in_size = size
        return nn.Sequential(*layers)

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:  # noqa: D102
        obs = input_dict["obs"].float()
        self._obs = obs.reshape(obs.shape[0], *self._shape)
        self._features = self._post(self._convs(self._obs))
        out = self._logits(self._features) if self._logits is not None else self._features
        return out, state

    def value_function(self) -> torch.Tensor:  # noqa: D102
        if self._features is None:
            raise ValueError("value_function() needs a forward() call first.")
        if self._value_convs is not None and self._value_post is not None:
            return self._value_branch(self._value_post(self._value_convs(self._obs))).squeeze(1)
        return self._value_branch(self._features).squeeze(1)
