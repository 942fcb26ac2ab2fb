"""LSTMContainingRLModule: a recurrent RLModule written RLlib's way (`_forward`, `compute_values`).

Observations [B, T, obs_dim] go through an LSTM (`lstm_cell_size`) and dense layers
(`dense_layers`, default [128, 128]) to the policy logits and the value head; the state is
{"h", "c"}, each [lstm_cell_size] per sample. PPO trains it on sequences of `max_seq_len`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.rl_module.apis import ValueFunctionAPI
from rlx.core.rl_module.torch import TorchRLModule


class LSTMContainingRLModule(TorchRLModule, ValueFunctionAPI):
    """LSTM -> dense layers -> policy logits (Discrete actions) and a value head."""

    def setup(self) -> None:
        in_size = int(np.prod(self.observation_space.shape))
        self._lstm_cell_size = int(self.model_config.get("lstm_cell_size", 256))
        self._lstm = nn.LSTM(in_size, self._lstm_cell_size, batch_first=True)
        layers: list[nn.Module] = []
        width = self._lstm_cell_size
        for size in self.model_config.get("dense_layers", [128, 128]):
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self._fc_net = nn.Sequential(*layers)
        self._pi_head = nn.Linear(width, int(self.action_space.n))
        self._values = nn.Linear(width, 1)

    def get_initial_state(self) -> dict[str, np.ndarray]:
        return {"h": np.zeros(self._lstm_cell_size, np.float32), "c": np.zeros(self._lstm_cell_size, np.float32)}

    def _embeddings_and_state(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        obs = torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)
        obs = obs.reshape(obs.shape[0], obs.shape[1], -1)
        state = batch[Columns.STATE_IN]
        out, (h, c) = self._lstm(obs, (torch.as_tensor(state["h"]).unsqueeze(0),
                                       torch.as_tensor(state["c"]).unsqueeze(0)))
        return self._fc_net(out), {"h": h.squeeze(0), "c": c.squeeze(0)}

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self._embeddings_and_state(batch)
        return {Columns.ACTION_DIST_INPUTS: self._pi_head(embeddings), Columns.STATE_OUT: state_out}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self._embeddings_and_state(batch)
        return {Columns.ACTION_DIST_INPUTS: self._pi_head(embeddings), Columns.STATE_OUT: state_out,
                Columns.EMBEDDINGS: embeddings}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """Values [B, T] (from the given embeddings, else from a forward pass)."""
        if embeddings is None:
            embeddings, _ = self._embeddings_and_state(batch)
        return self._values(embeddings).squeeze(-1)
