"""Recurrent old-API models (RLlib's `ray.rllib.models.torch.recurrent_net`).

`RecurrentNetwork` is the base class of custom RNN ModelV2s: subclasses implement
`forward_rnn(inputs [B, T, obs], state [B, size] each, seq_lens) -> (outputs [B, T, n],
new state)` and `get_initial_state()`; `forward()` adds and removes the time axis.

`LSTMWrapper` is what `model={"use_lstm": True}` puts around a ModelV2 (the default
FullyConnectedNetwork or a `custom_model`): the wrapped model, built with
`num_outputs=None`, produces features; an LSTM of `lstm_cell_size` runs over them, and
linear action and value branches read its outputs.

rlx runs both inside `ModelV2RLModule`, so PPO trains them on sequences of at most
`max_seq_len` steps, as it trains its own LSTM module. RLlib's path,
`rlx.models.torch.recurrent_net`, is an alias of this module's names.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.models.v2.misc import SlimFC, normc_initializer
from rlx.core.models.v2.torch_modelv2 import TorchModelV2
from rlx.core.models.v2.rnn_sequencing import add_time_dimension

__all__ = ["LSTMWrapper", "RecurrentNetwork"]


class RecurrentNetwork(TorchModelV2):
    """Base class of RNN ModelV2s: implement `forward_rnn` and `get_initial_state`.

    Example:
        >>> class MyRNN(RecurrentNetwork, nn.Module):
        ...     def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        ...         nn.Module.__init__(self)
        ...         super().__init__(obs_space, action_space, num_outputs, model_config, name)
        ...         self.gru = nn.GRU(obs_space.shape[0], 32, batch_first=True)
        ...         self.logits, self.value = nn.Linear(32, num_outputs), nn.Linear(32, 1)
        ...     def get_initial_state(self):
        ...         return [np.zeros(32, np.float32)]
        ...     def forward_rnn(self, inputs, state, seq_lens):
        ...         self._out, h = self.gru(inputs, state[0][None])
        ...         return self.logits(self._out), [h[0]]
        ...     def value_function(self):
        ...         return self.value(self._out).reshape(-1)
    """

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        """Run `forward_rnn` on `input_dict["obs_flat"]` cut into `len(seq_lens)` sequences;
        return its outputs flattened back to [B * T, num_outputs] and the new state."""
        flat_inputs = input_dict["obs_flat"].float()
        if seq_lens is None:  # one step per row (a plain forward pass outside of training)
            seq_lens = torch.ones(flat_inputs.shape[0], dtype=torch.int32)
        inputs = add_time_dimension(flat_inputs, seq_lens=seq_lens, framework="torch", time_major=self.time_major)
        output, new_state = self.forward_rnn(inputs, state, seq_lens)
        return torch.reshape(output, [-1, int(self.num_outputs or output.shape[-1])]), new_state

    def forward_rnn(self, inputs: torch.Tensor, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        """Return `(outputs [B, T, num_outputs], new state [each [B, size]])` for `inputs` [B, T, obs]
        and the state at the sequences' start. Implement this in subclasses."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward_rnn(inputs, state, seq_lens).")


class LSTMWrapper(RecurrentNetwork, nn.Module):
    """An LSTM (`lstm_cell_size`) after a wrapped ModelV2's features, then action and value branches.

    Args:
        wrapped: the model whose outputs are the LSTM's inputs (built with `num_outputs=None`,
            so that it outputs its last hidden layer and sets `wrapped.num_outputs` to its width).
        obs_space, action_space, num_outputs, model_config, name: as for every ModelV2.
    """

    def __init__(self, wrapped: TorchModelV2, obs_space: gym.Space, action_space: gym.Space,
                 num_outputs: int, model_config: dict, name: str):
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        features = getattr(wrapped, "num_outputs", None)
        if not features:
            raise ValueError(
                f"use_lstm wraps {type(wrapped).__name__} in an LSTM, so the model is built with num_outputs=None "
                "and must then output its features and set self.num_outputs to their width.")
        self.wrapped = wrapped
        self.cell_size = int(model_config.get("lstm_cell_size", 256))
        self.lstm = nn.LSTM(int(features), self.cell_size, batch_first=not self.time_major)
        self._logits_branch = SlimFC(self.cell_size, num_outputs, normc_initializer(0.01), None)
        self._value_branch = SlimFC(self.cell_size, 1, normc_initializer(0.01), None)
        self._features: torch.Tensor | None = None

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        """The wrapped model's features of every step, then the LSTM over each sequence."""
        features, _ = self.wrapped(input_dict, [], None)
        return super().forward({**input_dict, "obs_flat": features}, state, seq_lens)

    def forward_rnn(self, inputs: torch.Tensor, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        """LSTM outputs through the action branch; the value branch reads them in value_function()."""
        h0 = torch.as_tensor(state[0], dtype=torch.float32).unsqueeze(0)
        c0 = torch.as_tensor(state[1], dtype=torch.float32).unsqueeze(0)
        self._features, (h, c) = self.lstm(inputs, (h0, c0))
        return self._logits_branch(self._features), [h.squeeze(0), c.squeeze(0)]

    def get_initial_state(self) -> list:
        """Zero LSTM state (h, c), each [lstm_cell_size]."""
        return [np.zeros(self.cell_size, np.float32), np.zeros(self.cell_size, np.float32)]

    def value_function(self) -> torch.Tensor:
        """Values [B * T] of the last forward pass."""
        if self._features is None:
            raise ValueError("value_function() needs a forward() call first.")
        return self._value_branch(self._features).reshape(-1)

    def custom_loss(self, policy_loss: Any, loss_inputs: Any) -> Any:
        """The wrapped model's custom loss."""
        return self.wrapped.custom_loss(policy_loss, loss_inputs)

    def metrics(self) -> dict:
        """The wrapped model's metrics."""
        return self.wrapped.metrics()
