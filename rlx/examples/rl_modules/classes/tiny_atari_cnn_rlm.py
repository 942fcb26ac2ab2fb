"""TinyAtariCNN: a small convolutional policy/value module for downsized Atari frames.

Conv layers from `model_config["conv_filters"]` ([out_channels, kernel, stride(, "same"|"valid")],
default: the old stack's 42x42 filters) turn [B, H, W, C] frames into a feature map; a 1x1 conv
with one filter per action turns it into logits, and a linear layer on the same features gives
the value. With the default filters on 42x42 frames the map is 1x1, so no flattening is needed;
larger maps are averaged over their positions. Target copies of the policy path serve
algorithms with target networks (APPO-style losses).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.learner.utils import make_target_network
from rlx.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS, TargetNetworkAPI, ValueFunctionAPI
from rlx.core.rl_module.torch import TorchRLModule
from rlx.models.torch.misc import normc_initializer, same_padding, valid_padding

#: The old API stack's default filters for 42x42 frames, with explicit padding.
DEFAULT_FILTERS = [[16, 4, 2, "same"], [32, 4, 2, "same"], [256, 11, 1, "valid"]]


class TinyAtariCNN(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI):
    """Conv stack -> (1x1 conv logits, linear value) for Discrete-action image envs."""

    def setup(self) -> None:
        """Build the conv stack, the logits conv and the value layer from the model config."""
        filters = (self.model_config or {}).get("conv_filters") or DEFAULT_FILTERS
        height, width, channels = self.observation_space.shape
        size: tuple[int, int] = (int(height), int(width))
        layers: list[nn.Module] = []
        for spec in filters:
            out_channels, kernel, stride = spec[:3]
            padding = spec[3] if len(spec) == 4 else "same"
            if padding == "same":
                pad, size = same_padding(size, kernel, stride)
                layers.append(nn.ZeroPad2d(pad))
            elif padding == "valid":
                size = valid_padding(size, kernel, stride)
            else:
                raise ValueError(f"conv_filters padding must be 'same' or 'valid', got {padding!r} in {spec}.")
            conv = nn.Conv2d(channels, out_channels, kernel, stride)
            nn.init.xavier_uniform_(conv.weight)
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.ReLU()]
            channels = out_channels
        if min(size) <= 0:
            raise ValueError(f"conv_filters {filters} leave no pixels of {self.observation_space.shape} frames.")
        self._base_cnn_stack = nn.Sequential(*layers)
        logits_conv = nn.Conv2d(channels, int(self.action_space.n), 1, 1)
        nn.init.xavier_uniform_(logits_conv.weight)
        nn.init.zeros_(logits_conv.bias)
        self._logits = logits_conv
        self._values = nn.Linear(channels, 1)
        normc_initializer(0.01)(self._values.weight)
        nn.init.zeros_(self._values.bias)

    @staticmethod
    def _channels_first(batch: dict[str, Any]) -> torch.Tensor:
        return batch[Columns.OBS].float().permute(0, 3, 1, 2)

    def _features_and_logits(self, feature_map: torch.Tensor, logits_layer: nn.Module) -> tuple[torch.Tensor, ...]:
        logits = logits_layer(feature_map).mean(dim=(-2, -1))
        return feature_map.mean(dim=(-2, -1)), logits

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        _, logits = self._features_and_logits(self._base_cnn_stack(self._channels_first(batch)), self._logits)
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, logits = self._features_and_logits(self._base_cnn_stack(self._channels_first(batch)),
                                                       self._logits)
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: embeddings}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values [B], from forward_train's embeddings when given."""
        if embeddings is None:
            embeddings = self._base_cnn_stack(self._channels_first(batch)).mean(dim=(-2, -1))
        return self._values(embeddings).squeeze(-1)

    def make_target_networks(self) -> None:
        """Frozen copies of the conv stack and the logits layer."""
        self._target_base_cnn_stack = make_target_network(self._base_cnn_stack)
        self._target_logits = make_target_network(self._logits)

    def get_target_network_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) pairs for the learner's target updates."""
        return [(self._base_cnn_stack, self._target_base_cnn_stack), (self._logits, self._target_logits)]

    def forward_target(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The target networks' logits."""
        feature_map = self._target_base_cnn_stack(self._channels_first(batch))
        _, logits = self._features_and_logits(feature_map, self._target_logits)
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: logits}
