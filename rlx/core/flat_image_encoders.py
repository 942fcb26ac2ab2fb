"""CNN encoders for the off-policy actor-critics (SAC, DDPG, TD3) on image observations.

Their learners hand the networks flat observations (`module.flat_obs`) and give the critics
`concat(flat_obs, action)`; these wrappers take that same input, cut the image back into its
[H, W(, C)] shape and run rlx.core.cnn's ImageEncoder on it, so the learners, target-network
copies and optimizer parameter groups (`module.pi`, `module.qf`) stay as they are.
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.cnn import ImageEncoder
from rlx.core.mlp import EnsembleMLP, make_mlp


class FlatImageEncoder(nn.Module):
    """ImageEncoder reading flattened images [B, H*W*C]; `out_dim` features per row."""

    def __init__(self, space: gym.spaces.Box, model_config: dict[str, Any]):
        super().__init__()
        self.shape = tuple(space.shape)
        self.encoder = ImageEncoder(space, model_config)
        self.out_dim = self.encoder.out_dim

    def forward(self, flat: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return self.encoder.forward(flat.reshape(flat.shape[0], *self.shape))


class ImageCriticEnsemble(nn.Module):
    """`num_members` critics on flat images (plus `extra_dim` trailing inputs, the action): one
    CNN per member, then an EnsembleMLP over [features, extra]. Input [B, obs_dim + extra_dim],
    output [E, B, out_dim], like EnsembleMLP's."""

    def __init__(self, num_members: int, space: gym.spaces.Box, model_config: dict[str, Any], extra_dim: int,
                 hiddens: Sequence[int], out_dim: int, activation: str | None = "relu"):
        super().__init__()
        self.num_members = num_members
        self.obs_dim = int(np.prod(space.shape))
        encoders = [FlatImageEncoder(space, model_config) for _ in range(num_members)]
        self.encoders = nn.ModuleList(encoders)
        self.mlp = EnsembleMLP(num_members, encoders[0].out_dim + extra_dim, hiddens, out_dim, activation)

    @property
    def weights(self) -> nn.ParameterList:
        """The MLP's weight matrices (what l2_reg penalizes)."""
        return self.mlp.weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        obs, extra = x[:, :self.obs_dim], x[:, self.obs_dim:]
        features = torch.stack([enc(obs) for enc in self.encoders])
        if extra.shape[-1]:
            features = torch.cat([features, extra.unsqueeze(0).expand(self.num_members, -1, -1)], dim=-1)
        return self.mlp(features)


def image_policy(space: gym.spaces.Box, model_config: dict[str, Any], hiddens: Sequence[int], activation: str | None,
                 out_dim: int, out_gain: float = 0.01) -> nn.Sequential:
    """A policy network on flat images: FlatImageEncoder, then an MLP `hiddens -> out_dim`."""
    encoder = FlatImageEncoder(space, model_config)
    return nn.Sequential(encoder, make_mlp(encoder.out_dim, [], None, out_dim, out_gain=out_gain,
                                           post_hiddens=hiddens, post_activation=activation))
