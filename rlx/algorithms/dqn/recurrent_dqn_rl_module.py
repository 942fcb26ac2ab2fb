"""Recurrent DQN's Q-network (model use_lstm=True): encoder (MLP or CNN), LSTM, then DQN's
advantage (and, dueling, value) heads, optionally noisy.

Batches carry a time axis as in rlx.core.lstm_models: `obs` is [B, T, ...], `state_in`
{"h": [B, cell], "c": [B, cell]}; Q-values are [B, T, A] and `state_out` the state after the
last step.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.algorithms.dqn.dqn_rl_module import QF_PREDS, _head
from rlx.core.action_masking import apply_action_mask, find_action_mask
from rlx.core.cnn import ImageEncoder, is_image_space
from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, Categorical
from rlx.core.models import flat_obs_dim, make_mlp, refuse_no_final_linear
from rlx.core.rl_module.rl_module import RLModule
from rlx.utils.errors import ConfigError, NotSupportedYetError


class RecurrentDQNRLModule(RLModule):
    """Q-network with an LSTM between the encoder and the Q head(s), for Discrete actions.

    Model-config keys: `fcnet_hiddens`, `fcnet_activation` (encoder; image observations get a
    CNN from `conv_filters`), `lstm_cell_size`, `max_seq_len` (the stored sequences' length),
    and DQN's `hiddens`, `dueling`, `noisy`, `sigma0`,
    `categorical_distribution_temperature`. `action_dist_inputs` are the Q-values (argmax is
    the greedy action), as in DQNRLModule.
    """

    #: A default module for model use_lstm (checked when the Algorithm completes its module spec).
    builds_use_lstm = True

    def setup(self) -> None:
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ConfigError(f"DQN needs a Discrete action space, got {self.action_space}. "
                              "For continuous actions use SAC, DDPG or TD3.")
        cfg = self.model_config
        refuse_no_final_linear(cfg, "DQN")
        obs_space = self._spaces()[0]
        if int(cfg.get("num_atoms", 1)) != 1:
            raise NotSupportedYetError("num_atoms > 1 (distributional DQN) with model use_lstm",
                                       "recurrent DQN learns expected Q-values", fix="Set num_atoms=1.")
        self.num_actions = int(self.action_space.n)
        self.num_atoms = 1
        self.cell_size = int(cfg.get("lstm_cell_size", 256))
        self.dueling = bool(cfg.get("dueling", True))
        self.noisy = bool(cfg.get("noisy", False))
        self.action_mask = find_action_mask(obs_space, self.action_space, cfg)
        space = self.action_mask.input_space if self.action_mask is not None else obs_space
        if is_image_space(space, cfg):
            self._obs_shape: tuple = tuple(space.shape)
            self.encoder: nn.Module | None = ImageEncoder(space, cfg)
            feat_dim = self.encoder.out_dim
        else:
            self._obs_shape = (-1,)
            hiddens = list(cfg.get("fcnet_hiddens", [64]))
            self.encoder = make_mlp(flat_obs_dim(space), hiddens, cfg.get("fcnet_activation", "relu")) \
                if hiddens else None
            feat_dim = hiddens[-1] if hiddens else flat_obs_dim(space)
        self.lstm = nn.LSTM(feat_dim, self.cell_size, batch_first=True)
        self.noise_generator = torch.Generator()
        self.noise_generator.manual_seed(int(torch.randint(0, 2**62, ())))
        sigma0 = float(cfg.get("sigma0", 0.5))
        heads = list(cfg.get("hiddens", [64]))
        self.advantage = _head(self.cell_size, heads, self.num_actions, self.noisy, sigma0, self.noise_generator)
        self.value = _head(self.cell_size, heads, 1, self.noisy, sigma0, self.noise_generator) \
            if self.dueling else None
        self.temperature = float(cfg.get("categorical_distribution_temperature", 1.0))

    def get_initial_state(self) -> dict[str, Any]:
        """Zero LSTM state {"h", "c"} of `lstm_cell_size` each."""
        return {"h": np.zeros(self.cell_size, np.float32), "c": np.zeros(self.cell_size, np.float32)}

    def _call_head(self, head: nn.Module, x: torch.Tensor, noisy: bool) -> torch.Tensor:
        return head.forward(x, noisy) if self.noisy else head.forward(x)

    def q_outputs(self, obs: Any, state_in: dict[str, Any], noisy: bool = True
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(Q-values [B, T, A], state after the last step) of observations [B, T, ...] from
        `state_in` {"h": [B, cell], "c": [B, cell]}; masked actions' Q-values are FLOAT_MIN."""
        mask = None
        if self.action_mask is not None:
            obs, mask = self.action_mask.split(obs if isinstance(obs, dict) else torch.as_tensor(obs))
        obs = torch.as_tensor(obs, dtype=torch.float32)
        B, T = obs.shape[:2]
        x = obs.reshape(B * T, *self._obs_shape)
        if self.encoder is not None:
            x = self.encoder.forward(x)
        h0 = torch.as_tensor(state_in["h"], dtype=torch.float32).unsqueeze(0)
        c0 = torch.as_tensor(state_in["c"], dtype=torch.float32).unsqueeze(0)
        out, (h1, c1) = self.lstm(x.reshape(B, T, -1), (h0, c0))
        adv = self._call_head(self.advantage, out, noisy)
        if self.value is not None:
            adv = self._call_head(self.value, out, noisy) + adv - adv.mean(dim=-1, keepdim=True)
        return apply_action_mask(adv, mask), {"h": h1.squeeze(0), "c": c1.squeeze(0)}

    def q_values(self, outputs: torch.Tensor) -> torch.Tensor:
        """Expected Q-values from `q_outputs` (the same tensor: no atoms here)."""
        return outputs

    def _q_forward(self, batch: dict[str, Any], noisy: bool) -> dict[str, Any]:
        q, state_out = self.q_outputs(batch[Columns.OBS], batch[Columns.STATE_IN], noisy=noisy)
        return {Columns.ACTION_DIST_INPUTS: q, QF_PREDS: q, Columns.STATE_OUT: state_out}

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._q_forward(batch, noisy=False)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._q_forward(batch, noisy=self.noisy)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._q_forward(batch, noisy=self.noisy)

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """Categorical over Q-values (tempered by categorical_distribution_temperature)."""
        return BoundDistribution(Categorical, temperature=self.temperature)

    def get_inference_action_dist_cls(self) -> BoundDistribution:
        """Categorical over Q-values; its deterministic sample is the greedy action."""
        return BoundDistribution(Categorical)
