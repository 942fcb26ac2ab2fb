"""Recurrent DDPG's and TD3's networks (model use_lstm=True): an actor LSTM and one LSTM per critic.

The actor is actor_hiddens' encoder, an LSTM of model['lstm_cell_size'], then a linear layer
squashed by tanh into [-1, 1]; each critic (two with twin_q) is critic_hiddens' encoder of the
observation, an LSTM of its own, then an MLP of critic_hiddens on concat(LSTM output, action).
The critics read observations only, so their LSTMs step while acting and their state is stored
with each replayed sequence next to the actor's (rlx.core.lstm_nets.LSTMReplayModule): state
{"h", "c"} [cell] (actor) and {"q_h", "q_c"} [E, cell] (critics).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import BoundDistribution, Deterministic
from rlx.core.lstm_nets import LSTMCriticEnsemble, LSTMNet, LSTMReplayModule, refuse_unsupported_recurrent_inputs
from rlx.core.models import flat_obs_dim, refuse_no_final_linear
from rlx.utils.errors import ConfigError


class RecurrentDDPGRLModule(LSTMReplayModule):
    """Deterministic actor LSTM `pi` and critic ensemble `qf` for a 1-D Box action space.

    Model-config keys: `lstm_cell_size` (default 256), `max_seq_len` (the replayed sequences'
    length) and DDPGConfig's `actor_hiddens`, `actor_hidden_activation`, `critic_hiddens`,
    `critic_hidden_activation` and `twin_q`. `action_dist_inputs` are the actions themselves
    (a `Deterministic` distribution); exploration noise comes from `exploration_config`.
    """

    def setup(self) -> None:
        cfg = self.model_config
        refuse_no_final_linear(cfg, "DDPG and TD3")
        obs_space, space = self._spaces()
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
            raise ConfigError(f"DDPG and TD3 need a 1-D Box (continuous) action space, got {space}. "
                              "For discrete actions use DQN or SAC.")
        refuse_unsupported_recurrent_inputs(self, "DDPG/TD3")
        self.discrete = False
        obs_dim = flat_obs_dim(obs_space)
        self.action_dim = int(np.prod(space.shape))
        self.cell_size = int(cfg.get("lstm_cell_size", 256))
        self.twin_q = bool(cfg.get("twin_q", False))
        # A small output gain starts the actor near the middle of the action range (tanh's slope is largest there).
        self.pi = LSTMNet(obs_dim, cfg.get("actor_hiddens", [400, 300]), cfg.get("actor_hidden_activation", "relu"),
                          self.cell_size, self.action_dim, out_gain=0.01)
        self.qf = LSTMCriticEnsemble(2 if self.twin_q else 1, obs_dim, cfg.get("critic_hiddens", [400, 300]),
                                     cfg.get("critic_hidden_activation", "relu"), self.cell_size, self.action_dim, 1)

    def policy_unroll(self, obs: Any, state: dict[str, Any], pi: LSTMNet | None = None
                      ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(deterministic actions in [-1, 1], [B, T, action_dim], actor state {"h", "c"} after the
        last step); `pi` swaps in e.g. the target actor."""
        net = self.pi if pi is None else pi
        feats, h, c = net.features(self.flat_obs(obs), torch.as_tensor(state["h"]), torch.as_tensor(state["c"]))
        return torch.tanh(net.head_out(feats)), {"h": h, "c": c}

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """Deterministic: the distribution inputs are the actions."""
        return BoundDistribution(Deterministic)
