"""VPGTorchRLModule: the bare-bones vanilla-policy-gradient module of RLlib's custom-algorithm examples."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.rl_module.torch import TorchRLModule


class VPGTorchRLModule(TorchRLModule):
    """obs -> Linear(hidden_dim) -> ReLU -> Linear(action_space.n) action logits.

    `model_config["hidden_dim"]` sets the hidden width; Discrete actions only. Its one
    `_forward` serves acting and training (RLlib's minimal custom TorchRLModule).
    """

    def setup(self) -> None:
        """Build the two-layer policy network from the spaces and `model_config["hidden_dim"]`."""
        observation_space, action_space = self._spaces()
        if "hidden_dim" not in self.model_config:
            raise ValueError("VPGTorchRLModule needs model_config={'hidden_dim': <int>} (the hidden layer's width).")
        if not hasattr(action_space, "n"):
            raise ValueError(f"VPGTorchRLModule takes a Discrete action space, got {action_space}.")
        hidden_dim = int(self.model_config["hidden_dim"])
        self._policy_net = nn.Sequential(
            nn.Linear(int(observation_space.shape[0]), hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, int(action_space.n)),
        )

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)
        return {Columns.ACTION_DIST_INPUTS: self._policy_net(obs)}
