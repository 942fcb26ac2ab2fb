"""Recurrent SAC's networks (model use_lstm=True): a policy LSTM and one LSTM per critic.

As in RLlib's RNNSAC, the policy and the critics have separate memories: the policy is
policy_model_config's fcnet_hiddens encoder, an LSTM of model['lstm_cell_size'], then the
action-distribution layer; each critic (two with twin_q) is q_model_config's fcnet_hiddens
encoder of the observation, an LSTM of its own, then an MLP of the same fcnet_hiddens on
concat(LSTM output, action) (Box) or on the LSTM output with one Q-value per action (Discrete).
The critics read observations only, so their LSTMs step while acting (before an action is
picked) and their state is stored with each replayed sequence next to the policy's:
state {"h", "c"} [cell] (policy) and {"q_h", "q_c"} [E, cell] (critics).

Batches carry a time axis as in rlx.core.lstm_models: `obs` [B, T, ...], `state_in` as above.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import BoundDistribution, Categorical, SquashedGaussian
from rlx.core.lstm_nets import LSTMCriticEnsemble, LSTMNet, LSTMReplayModule, refuse_unsupported_recurrent_inputs
from rlx.core.models import flat_obs_dim, refuse_no_final_linear
from rlx.utils.errors import ConfigError


class RecurrentSACRLModule(LSTMReplayModule):
    """Policy LSTM `pi` and critic ensemble `qf` (see the module docstring), for Box and Discrete actions.

    Model-config keys: `lstm_cell_size` (default 256), `max_seq_len` (the replayed sequences'
    length), `twin_q`, and SACConfig's `policy_model_config` / `q_model_config` (fcnet_hiddens,
    fcnet_activation). The critics are built also with inference_only: their state travels with
    the policy's.
    """

    def setup(self) -> None:
        cfg = self.model_config
        refuse_no_final_linear(cfg, "SAC")
        obs_space, space = self._spaces()
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if isinstance(space, gym.spaces.Discrete):
            self.action_dim = int(space.n)
        elif isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
            self.action_dim = int(np.prod(space.shape))
        else:
            raise ConfigError(f"SAC needs a Discrete or a 1-D Box action space, got {space}.")
        refuse_unsupported_recurrent_inputs(self, "SAC")
        obs_dim = flat_obs_dim(obs_space)
        self.cell_size = int(cfg.get("lstm_cell_size", 256))
        pi_cfg = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu", **(cfg.get("policy_model_config") or {})}
        q_cfg = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu", **(cfg.get("q_model_config") or {})}
        self.twin_q = bool(cfg.get("twin_q", True))
        self.pi = LSTMNet(obs_dim, pi_cfg["fcnet_hiddens"], pi_cfg["fcnet_activation"], self.cell_size,
                          self.action_dim if self.discrete else 2 * self.action_dim, out_gain=0.01)
        self.qf = LSTMCriticEnsemble(2 if self.twin_q else 1, obs_dim, q_cfg["fcnet_hiddens"],
                                     q_cfg["fcnet_activation"], self.cell_size,
                                     0 if self.discrete else self.action_dim, self.action_dim if self.discrete else 1)

    def policy_unroll(self, obs: Any, state: dict[str, Any], pi: LSTMNet | None = None
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(action-distribution inputs [B, T, ...], policy state {"h", "c"} after the last step):
        [mean, log_std] (Box) or logits (Discrete)."""
        net = self.pi if pi is None else pi
        feats, h, c = net.features(self.flat_obs(obs), torch.as_tensor(state["h"]), torch.as_tensor(state["c"]))
        out = net.head_out(feats)
        if not self.discrete:
            mean, log_std = out.chunk(2, dim=-1)
            # Bound log_std as SAC implementations do, so exp() neither vanishes nor explodes.
            out = torch.cat([mean, log_std.clamp(-20.0, 2.0)], dim=-1)
        return out, {"h": h, "c": c}

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """SquashedGaussian for Box actions, Categorical for Discrete."""
        return BoundDistribution(Categorical) if self.discrete else BoundDistribution(SquashedGaussian)
