"""Convolutional encoders for image observations, built from the model config's `conv_filters`.

Images are channel-last ([H, W, C], or [H, W] for one channel), as Gymnasium and RLlib give
them. A layer's optional 4th item sets its padding; without it every layer but the last pads to
keep `ceil(size / stride)` ("same") and the last one is "valid" (the old stack's VisionNet), so RLlib's default filters turn an 84x84 frame into a 1x1x256 feature map. uint8
observations (a uint8 Box, or a float32 one whose `original_space` is uint8) are scaled to
[0, 1] inside the encoder.
"""
from __future__ import annotations

import math
from typing import Any, Sequence, TypeGuard

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlx.core.model_defaults import check_conv_filters
from rlx.core.mlp import ACTIVATION_FNS, make_mlp
from rlx.utils.errors import ConfigError

#: RLlib's default `conv_filters` by image size: [out_channels, [kernel_h, kernel_w], stride] per layer.
DEFAULT_CONV_FILTERS: dict[tuple[int, int], list[list[Any]]] = {
    (96, 96): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 2]],
    (84, 84): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]],
    (64, 64): [[16, [4, 4], 2], [32, [4, 4], 2], [64, [4, 4], 2], [128, [4, 4], 2]],
    (42, 42): [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]],
    (10, 10): [[16, [5, 5], 2], [32, [5, 5], 2]],
}


def is_image_space(space: gym.Space, model_config: dict[str, Any]) -> TypeGuard[gym.spaces.Box]:
    """Whether the default models read `space` with a CNN: [H, W, C] boxes always (as RLlib),
    [H, W] boxes when the model config sets `conv_filters`."""
    if not isinstance(space, gym.spaces.Box):
        return False
    rank = len(space.shape)
    return rank == 3 or (rank == 2 and model_config.get("conv_filters") is not None)


def default_conv_filters(shape: Sequence[int]) -> list[list[Any]]:
    """RLlib's default `conv_filters` for an image of `shape` ([H, W, C] or [H, W])."""
    size = tuple(int(d) for d in shape[:2])
    if size in DEFAULT_CONV_FILTERS:
        return DEFAULT_CONV_FILTERS[size]
    known = ", ".join(f"{h}x{w}" for h, w in DEFAULT_CONV_FILTERS)
    atari = (" It is a raw Atari frame: keep preprocessor_pref='deepmind' (84x84 frames) or wrap the env with "
             "rlx.env.wrappers.atari_wrappers.wrap_atari_for_new_api_stack.") if size == (210, 160) else ""
    raise ConfigError(
        f"No default CNN for image observations of shape {tuple(shape)}: defaults exist for {known} images.{atari} "
        "Set model_config['conv_filters'] to a list of [out_channels, [kernel_h, kernel_w], stride] layers, or "
        "flatten the observations (gymnasium.wrappers.FlattenObservation) to use an MLP."
    )


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class CNN(nn.Module):
    """Conv layers (all "same" but the last, which is "valid") flattened into a feature vector.

    `out_dim` is the feature vector's width. Input [B, H, W, C] or [B, H, W].
    """

    def __init__(self, obs_shape: Sequence[int], filters: Any, activation: str | None = "relu",
                 scale_uint8: bool = False):
        super().__init__()

        layers = check_conv_filters(filters)
        h, w = int(obs_shape[0]), int(obs_shape[1])
        channels = int(obs_shape[2]) if len(obs_shape) == 3 else 1
        self._add_channel = len(obs_shape) == 2
        self._scale = 1.0 / 255.0 if scale_uint8 else None
        self._act = ACTIVATION_FNS[activation]
        self.convs = nn.ModuleList()
        self._pads: list[tuple[int, int, int, int]] = []
        for i, (out, (kh, kw), (sh, sw), *padding) in enumerate(layers):
            kernel, stride = (kh, kw), (sh, sw)
            same = padding[0] == "same" if padding else i < len(layers) - 1
            if same:
                top, bottom = _same_padding(h, kernel[0], stride[0])
                left, right = _same_padding(w, kernel[1], stride[1])
            else:
                top = bottom = left = right = 0
            h = (h + top + bottom - kernel[0]) // stride[0] + 1
            w = (w + left + right - kernel[1]) // stride[1] + 1
            if h <= 0 or w <= 0:
                raise ConfigError(
                    f"model_config['conv_filters'] {filters!r} do not fit observations of shape {tuple(obs_shape)}: "
                    f"layer {i} ({out}, kernel {list(kernel)}, stride {list(stride)}) leaves no pixels. Use smaller "
                    "kernels or strides, or fewer layers.")
            conv = nn.Conv2d(channels, out, kernel, stride)
            nn.init.orthogonal_(conv.weight, gain=math.sqrt(2.0))
            assert conv.bias is not None  # Conv2d's default bias=True
            nn.init.zeros_(conv.bias)
            self.convs.append(conv)
            self._pads.append((left, right, top, bottom))
            channels = out
        self.out_dim = int(channels * h * w)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Feature vectors [B, out_dim] of images [B, H, W(, C)]."""
        x = obs.unsqueeze(-1) if self._add_channel else obs
        x = x.permute(0, 3, 1, 2).float()
        if self._scale is not None:
            x = x * self._scale
        for conv, pad in zip(self.convs, self._pads):
            if any(pad):
                x = F.pad(x, pad)
            x = conv(x)
            if self._act is not None:
                x = self._act(x)
        return x.reshape(x.shape[0], -1)


class ImageEncoder(nn.Module):
    """A CNN followed by the `post_fcnet_hiddens` MLP: image observations to feature vectors."""

    def __init__(self, space: gym.spaces.Box, model_config: dict[str, Any]):
        super().__init__()

        filters = model_config.get("conv_filters") or default_conv_filters(space.shape)
        self.cnn = CNN(space.shape, filters, model_config.get("conv_activation", "relu"),
                       scale_uint8=getattr(space, "original_space", space).dtype == np.uint8)
        post = list(model_config.get("post_fcnet_hiddens") or [])
        self.post = make_mlp(self.cnn.out_dim, post, model_config.get("post_fcnet_activation", "relu")) \
            if post else None
        self.out_dim = post[-1] if post else self.cnn.out_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Feature vectors [B, out_dim] of observations [B, *space.shape]."""
        x = self.cnn.forward(obs)
        return self.post.forward(x) if self.post is not None else x
