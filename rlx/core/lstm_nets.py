"""LSTM building blocks of the recurrent actor-critic modules of replay algorithms (recurrent SAC,
DDPG, TD3): a policy network (encoder MLP, LSTM, head) and an ensemble of critics, each with an
observation encoder and LSTM of its own and a head reading (LSTM output, action).

Tensors are batch-first with a time axis: observations [B, T, D]; states [B, cell] (policy) and
[B, E, cell] (an ensemble of E critics).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from rlx.core.action_masking import find_action_mask
from rlx.core.cnn import is_image_space
from rlx.core.columns import Columns
from rlx.core.models import make_mlp
from rlx.core.rl_module.rl_module import RLModule
from rlx.utils.errors import NotSupportedYetError


class LSTMNet(nn.Module):
    """obs -> MLP encoder (`hiddens`) -> LSTM (`cell_size`) -> head MLP on concat(LSTM output, extra)
    (`head_hiddens`) -> `out_dim`."""

    def __init__(self, in_dim: int, hiddens: Sequence[int], activation: str, cell_size: int, out_dim: int,
                 head_hiddens: Sequence[int] = (), extra_dim: int = 0, out_gain: float = 1.0):
        super().__init__()
        hiddens = list(hiddens)
        self.encoder = make_mlp(in_dim, hiddens, activation) if hiddens else nn.Identity()
        self.lstm = nn.LSTM(hiddens[-1] if hiddens else in_dim, cell_size, batch_first=True)
        self.head = make_mlp(cell_size + extra_dim, list(head_hiddens), activation, out_dim, out_gain=out_gain)

    def features(self, obs: torch.Tensor, h: torch.Tensor, c: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(LSTM outputs [B, T, cell], h, c after the last step) of observations [B, T, D]."""
        B, T = obs.shape[:2]
        x = self.encoder(obs.reshape(B * T, -1)).reshape(B, T, -1)
        out, (h1, c1) = self.lstm(x, (h.unsqueeze(0).contiguous(), c.unsqueeze(0).contiguous()))
        return out, h1.squeeze(0), c1.squeeze(0)

    def head_out(self, features: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        """The head's output [..., out_dim] of features [..., cell] (and `extra` [..., extra_dim])."""
        return self.head(features if extra is None else torch.cat([features, extra], dim=-1))


class LSTMCriticEnsemble(nn.Module):
    """`num_members` independent LSTMNets (twin critics: 2) reading observations, whose heads read
    concat(LSTM output, action) (Box actions) or the LSTM output alone (Discrete: one value per action)."""

    def __init__(self, num_members: int, obs_dim: int, hiddens: Sequence[int], activation: str, cell_size: int,
                 action_dim: int, out_dim: int):
        super().__init__()
        self.nets = nn.ModuleList(
            LSTMNet(obs_dim, hiddens, activation, cell_size, out_dim, head_hiddens=hiddens, extra_dim=action_dim)
            for _ in range(num_members))

    @property
    def _members(self) -> Sequence[LSTMNet]:
        """The critics' LSTMNets."""
        return cast("Sequence[LSTMNet]", self.nets)  # a ModuleList of the LSTMNets built above

    @property
    def num_members(self) -> int:
        """Critics in the ensemble."""
        return len(self.nets)

    @property
    def weights(self) -> list[torch.Tensor]:
        """Weight matrices of the linear layers and the LSTMs (what an L2 penalty reads)."""
        return [p for name, p in self.named_parameters() if "weight" in name]

    def features(self, obs: torch.Tensor, h: torch.Tensor, c: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(LSTM outputs [B, T, E, cell], h, c [B, E, cell] after the last step)."""
        outs, hs, cs = zip(*(net.features(obs, h[:, i], c[:, i]) for i, net in enumerate(self._members)))
        return torch.stack(outs, dim=2), torch.stack(hs, dim=1), torch.stack(cs, dim=1)

    def values(self, features: torch.Tensor, actions: torch.Tensor | None = None) -> torch.Tensor:
        """Critic outputs [E, B, T, out_dim] of features [B, T, E, cell] (and actions [B, T, A])."""
        return torch.stack([net.head_out(features[:, :, i], actions) for i, net in enumerate(self._members)])


def refuse_unsupported_recurrent_inputs(module: RLModule, algorithm: str) -> None:
    """NotSupportedYetError for image observations and action masks in a recurrent replay module."""
    cfg = module.model_config
    obs_space, action_space = module._spaces()
    if is_image_space(obs_space, cfg):
        raise NotSupportedYetError(f"image observations with model use_lstm in {algorithm}",
                                   f"recurrent {algorithm} encodes flat observations with an MLP",
                                   fix="Use PPO or DQN with use_lstm for image observations, or leave use_lstm off.")
    if find_action_mask(obs_space, action_space, cfg) is not None:
        raise NotSupportedYetError(f"action masking with {algorithm}",
                                   "the default modules of PPO and DQN mask actions",
                                   fix="Use PPO or DQN for envs with an action mask in the observation.")


class LSTMReplayModule(RLModule):
    """Base of the recurrent modules of replay actor-critics (recurrent SAC, DDPG, TD3): a policy
    LSTMNet `pi` and an LSTMCriticEnsemble `qf` whose LSTMs read observations only, so they step
    while acting and their state is stored for replay next to the policy's: state {"h", "c"}
    [cell] (policy) and {"q_h", "q_c"} [E, cell] (critics).

    Subclasses build `pi`, `qf`, `cell_size` and `discrete` in `setup` and define
    `policy_unroll(obs, state, pi=None) -> (policy outputs [B, T, ...], {"h", "c"} after the last
    step)`, where `pi` swaps in e.g. a target policy.
    """

    #: rlx.algorithms.module_specs: this is a default module for model use_lstm.
    builds_use_lstm = True
    # Built by the subclass's `setup`.
    pi: LSTMNet
    qf: LSTMCriticEnsemble
    cell_size: int
    discrete: bool
    #: policy_unroll(obs, state, pi=None) -> (policy outputs [B, T, ...], {"h", "c"} after the last step).
    policy_unroll: Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]

    def get_initial_state(self) -> dict[str, Any]:
        """Zero states: policy {"h", "c"} [cell], critics {"q_h", "q_c"} [E, cell]."""
        e, cell = self.qf.num_members, self.cell_size
        return {"h": np.zeros(cell, np.float32), "c": np.zeros(cell, np.float32),
                "q_h": np.zeros((e, cell), np.float32), "q_c": np.zeros((e, cell), np.float32)}

    @staticmethod
    def flat_obs(obs: Any) -> torch.Tensor:
        """Observations [B, T, ...] as the networks read them: float [B, T, obs_dim]."""
        obs = torch.as_tensor(obs, dtype=torch.float32)
        return obs.reshape(obs.shape[0], obs.shape[1], -1)

    def critic_features(self, obs: Any, state: dict[str, Any], qf: LSTMCriticEnsemble | None = None
                        ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(critics' LSTM outputs [B, T, E, cell], critic state {"q_h", "q_c"} after the last step);
        `qf` swaps in e.g. the target critics."""
        net = self.qf if qf is None else qf
        feats, h, c = net.features(self.flat_obs(obs), torch.as_tensor(state["q_h"]), torch.as_tensor(state["q_c"]))
        return feats, {"q_h": h, "q_c": c}

    def q_values(self, features: torch.Tensor, actions: torch.Tensor | None = None,
                 qf: LSTMCriticEnsemble | None = None) -> torch.Tensor:
        """Critic outputs of `critic_features`: [E, B, T] for Box actions (given actions [B, T, A]),
        [E, B, T, n] for Discrete."""
        out = (self.qf if qf is None else qf).values(features, None if self.discrete else actions)
        return out if self.discrete else out.squeeze(-1)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        state = batch[Columns.STATE_IN]
        dist_inputs, state_out = self.policy_unroll(batch[Columns.OBS], state)
        # The critics' LSTMs step too, so the critic state stored for replay follows the episode.
        _, q_state = self.critic_features(batch[Columns.OBS], state)
        return {Columns.ACTION_DIST_INPUTS: dist_inputs, Columns.STATE_OUT: {**state_out, **q_state}}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)
