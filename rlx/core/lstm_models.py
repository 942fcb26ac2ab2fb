"""The default recurrent module (model["use_lstm"]=True): MLP encoder, LSTM, policy and value heads.

Batches carry a time axis: `obs` is [B, T, ...], `state_in` {"h": [B, cell], "c": [B, cell]};
outputs are [B, T, ...] and `state_out` the state after the last step.
"""
from __future__ import annotations

from typing import Any, cast

import gymnasium as gym

import numpy as np
import torch
from torch import nn

from rlx.core.action_masking import apply_action_mask, find_action_mask
from rlx.core.columns import Columns
from rlx.core.distributions import DiagGaussian, dist_class_for_space
from rlx.core.cnn import CNN, default_conv_filters, is_image_space
from rlx.core.model_defaults import initial_log_std
from rlx.core.models import flat_obs_dim, make_mlp
from rlx.core.rl_module.rl_module import RLModule, built_layer


class LSTMActorCriticModule(RLModule):
    """Actor-critic with an LSTM after the fcnet encoder (RLlib's use_lstm), value head included.

    model_config keys: fcnet_hiddens / fcnet_activation (the encoder before the LSTM),
    lstm_cell_size, post_fcnet_hiddens / post_fcnet_activation (the heads' hidden layers),
    max_seq_len (the Learner's sequence length), free_log_std, and vf_share_layers: False (rlx's
    PPO default) gives the value function an encoder and LSTM of its own (state "vf_h", "vf_c"
    next to "h", "c"), so that large value targets do not swamp the policy's features.
    """

    def setup(self) -> None:
        cfg = self.model_config
        self.cell_size = int(cfg.get("lstm_cell_size", 256))
        obs_space, action_space = self._spaces()
        # With an action mask in the (Dict) observation, the networks read only the other keys.
        self.action_mask = find_action_mask(obs_space, action_space, cfg)
        self._space = self.action_mask.input_space if self.action_mask is not None else obs_space
        image_space = self._space if is_image_space(self._space, cfg) else None
        self._image = image_space is not None
        # Image observations: a CNN (conv_filters) feeds the LSTM; others: the fcnet_hiddens MLP.
        self._obs_shape = tuple(image_space.shape) if image_space is not None else (-1,)
        self.encoder, lstm_in = self._make_encoder()
        self.lstm = nn.LSTM(lstm_in, self.cell_size, batch_first=True)
        self.vf_share_layers = bool(cfg.get("vf_share_layers", False))
        if not self.vf_share_layers and not self.inference_only:
            self.vf_encoder, _ = self._make_encoder()
            self.vf_lstm = nn.LSTM(lstm_in, self.cell_size, batch_first=True)
        dist_cls, _ = dist_class_for_space(action_space, cfg)
        out_dim = dist_cls.required_input_dim(action_space, cfg)
        self.free_log_std = bool(cfg.get("free_log_std", False)) and dist_cls is DiagGaussian
        log_std_init = initial_log_std(cfg, self.free_log_std)
        pi_out = out_dim // 2 if self.free_log_std else out_dim
        post = list(cfg.get("post_fcnet_hiddens", []))
        post_act = cfg.get("post_fcnet_activation", "relu")
        self.pi = make_mlp(self.cell_size, post, post_act, pi_out, out_gain=0.01)
        self.vf: nn.Module | None = (None if self.inference_only
                                     else make_mlp(self.cell_size, post, post_act, 1, out_gain=1.0))
        if self.free_log_std:
            self.log_std = nn.Parameter(torch.full((pi_out,), log_std_init))

    def _make_encoder(self) -> tuple[nn.Module, int]:
        cfg = self.model_config
        if self._image:
            space = cast(gym.spaces.Box, self._space)  # self._image: is_image_space found a Box
            filters = cfg.get("conv_filters") or default_conv_filters(space.shape)
            cnn = CNN(space.shape, filters, cfg.get("conv_activation", "relu"),
                      scale_uint8=getattr(self._space, "original_space", self._space).dtype == np.uint8)
            return cnn, cnn.out_dim
        in_dim = flat_obs_dim(self._space)
        hiddens = list(cfg.get("fcnet_hiddens", [64, 64]))
        return make_mlp(in_dim, hiddens, cfg.get("fcnet_activation", "tanh")), (hiddens[-1] if hiddens else in_dim)

    def get_initial_state(self) -> dict[str, Any]:
        names = ("h", "c") if self.vf_share_layers or self.inference_only else ("h", "c", "vf_h", "vf_c")
        return {name: np.zeros(self.cell_size, np.float32) for name in names}

    def _run(self, encoder: nn.Module, lstm: nn.LSTM, obs: torch.Tensor, h: Any, c: Any) -> tuple[torch.Tensor, ...]:
        B, T = obs.shape[:2]
        x = encoder(obs.reshape(B * T, *self._obs_shape)).reshape(B, T, -1)
        h0 = torch.as_tensor(h, dtype=torch.float32).unsqueeze(0)
        c0 = torch.as_tensor(c, dtype=torch.float32).unsqueeze(0)
        out, (h1, c1) = lstm(x, (h0, c0))
        return out, h1.squeeze(0), c1.squeeze(0)

    def _obs(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The networks' input [B, T, ...] and the action mask [B, T, n] (None without one)."""
        obs, mask = batch[Columns.OBS], None
        if self.action_mask is not None:
            obs, mask = self.action_mask.split(obs if isinstance(obs, dict) else torch.as_tensor(obs))
        return torch.as_tensor(obs, dtype=torch.float32), mask

    def _embeddings(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        obs, _ = self._obs(batch)
        state = batch[Columns.STATE_IN]
        out, h, c = self._run(self.encoder, self.lstm, obs, state["h"], state["c"])
        state_out = {"h": h, "c": c}
        if "vf_h" in state:  # the value LSTM's state travels along, unchanged while acting
            state_out["vf_h"], state_out["vf_c"] = state["vf_h"], state["vf_c"]
        return out, state_out

    def _value_embeddings(self, batch: dict[str, Any], embeddings: torch.Tensor | None) -> torch.Tensor:
        if self.vf_share_layers:
            return embeddings if embeddings is not None else self._embeddings(batch)[0]
        obs, _ = self._obs(batch)
        state = batch[Columns.STATE_IN]
        out, _, _ = self._run(self.vf_encoder, self.vf_lstm, obs, state["vf_h"], state["vf_c"])
        return out

    def _logits(self, embeddings: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        out = self.pi(embeddings)
        if self.free_log_std:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return apply_action_mask(out, self._obs(batch)[1]) if self.action_mask is not None else out

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self._embeddings(batch)
        if "vf_h" in state_out:
            # The value LSTM steps too, so its state stays in sync with the episode.
            obs, _ = self._obs(batch)
            _, state_out["vf_h"], state_out["vf_c"] = self._run(self.vf_encoder, self.vf_lstm, obs,
                                                                 state_out["vf_h"], state_out["vf_c"])
        return {Columns.ACTION_DIST_INPUTS: self._logits(embeddings, batch), Columns.STATE_OUT: state_out}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self._embeddings(batch)
        values = built_layer(self, self.vf, "value head")(self._value_embeddings(batch, embeddings)).squeeze(-1)
        return {Columns.ACTION_DIST_INPUTS: self._logits(embeddings, batch), Columns.STATE_OUT: state_out,
                Columns.EMBEDDINGS: embeddings, Columns.VF_PREDS: values}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values [B, T]."""
        return built_layer(self, self.vf, "value head")(self._value_embeddings(batch, embeddings)).squeeze(-1)
