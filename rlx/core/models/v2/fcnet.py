"""FullyConnectedNetwork: the old API's default MLP model (RLlib's `ray.rllib.models.torch.fcnet`).

The default model of `build_model_v2`, so it lives in the core; RLlib's path,
`rlx.models.torch.fcnet`, is an alias of it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.models.v2.misc import AppendBiasLayer, SlimFC, normc_initializer
from rlx.core.models.v2.torch_modelv2 import TorchModelV2

__all__ = ["FullyConnectedNetwork"]


class FullyConnectedNetwork(TorchModelV2, nn.Module):
    """An MLP over the flat observation with a logits layer and a value branch.

    Reads `fcnet_hiddens` / `fcnet_activation`, `post_fcnet_hiddens` / `post_fcnet_activation`,
    `vf_share_layers` (the value branch reads the last hidden layer; else it has its own
    MLP), `free_log_std` (Box actions: the log-std half of the outputs is a free parameter)
    and `no_final_linear` (the last hidden layer has `num_outputs` units and is the output).
    With `num_outputs=None` (or 0) the model outputs its last hidden layer.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        cfg = model_config or {}
        hiddens = list(cfg.get("fcnet_hiddens", [256, 256])) + list(cfg.get("post_fcnet_hiddens", []))
        activation = cfg.get("fcnet_activation", "tanh")
        if not cfg.get("fcnet_hiddens", []):
            activation = cfg.get("post_fcnet_activation", activation)
        no_final_linear = bool(cfg.get("no_final_linear", False))
        self.vf_share_layers = bool(cfg.get("vf_share_layers", False))
        self.free_log_std = bool(cfg.get("free_log_std", False))
        if self.free_log_std:
            if not num_outputs or num_outputs % 2:
                raise ValueError(f"free_log_std needs an even num_outputs (means and log-stds), got {num_outputs}.")
            num_outputs //= 2

        in_size = int(np.prod(obs_space.shape or ()))
        prev = in_size
        layers: list[nn.Module] = []
        for size in hiddens[:-1]:
            layers.append(SlimFC(prev, size, normc_initializer(1.0), activation))
            prev = size
        self._logits = None
        if no_final_linear and num_outputs:
            layers.append(SlimFC(prev, num_outputs, normc_initializer(1.0), activation))
            prev = num_outputs
        else:
            if hiddens:
                layers.append(SlimFC(prev, hiddens[-1], normc_initializer(1.0), activation))
                prev = hiddens[-1]
            if num_outputs:
                self._logits = SlimFC(prev, num_outputs, normc_initializer(0.01), None)
            else:
                self.num_outputs = ([in_size] + hiddens)[-1]
        self._append_free_log_std = AppendBiasLayer(num_outputs) if self.free_log_std and num_outputs else None
        self._hidden_layers = nn.Sequential(*layers)

        self._value_branch_separate = None
        vf_in = prev
        if not self.vf_share_layers:
            vf_layers: list[nn.Module] = []
            vf_in = in_size
            for size in hiddens:
                vf_layers.append(SlimFC(vf_in, size, normc_initializer(1.0), activation))
                vf_in = size
            self._value_branch_separate = nn.Sequential(*vf_layers)
        self._value_branch = SlimFC(vf_in, 1, normc_initializer(0.01), None)
        self._features: torch.Tensor | None = None
        self._last_flat_in: torch.Tensor | None = None

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:  # noqa: D102
        obs = input_dict["obs_flat"].float()
        self._last_flat_in = obs.reshape(obs.shape[0], -1)
        self._features = self._hidden_layers(self._last_flat_in)
        logits = self._logits(self._features) if self._logits is not None else self._features
        if self._append_free_log_std is not None:
            logits = self._append_free_log_std(logits)
        return logits, state

    def value_function(self) -> torch.Tensor:  # noqa: D102
        if self._features is None:
            raise ValueError("value_function() needs a forward() call first.")
        if self._value_branch_separate is not None:
            return self._value_branch(self._value_branch_separate(self._last_flat_in)).squeeze(1)
        return self._value_branch(self._features).squeeze(1)
