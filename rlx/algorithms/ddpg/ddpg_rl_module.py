"""DDPG's and TD3's networks: a deterministic tanh actor and one or two Q-functions."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.cnn import is_image_space
from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, Deterministic
from rlx.core.flat_image_encoders import ImageCriticEnsemble, image_policy
from rlx.core.models import EnsembleMLP, flat_obs_dim, make_mlp, refuse_no_final_linear
from rlx.core.numpy_forward import as_float32_rows, keeps_methods, mlp_numpy_fn
from rlx.core.rl_module.rl_module import RLModule
from rlx.utils.errors import ConfigError


class DDPGRLModule(RLModule):
    """Deterministic actor `pi` and critic ensemble `qf` for a 1-D Box action space.

    `pi` maps observations through `actor_hiddens` to one pre-activation per action
    dimension, squashed by tanh into [-1, 1] (with normalize_actions the EnvRunner maps
    that onto the env's bounds). `qf` is an EnsembleMLP of 2 members (twin_q) or 1 reading
    concat(obs, action). `action_dist_inputs` are the actions themselves, read by a
    `Deterministic` distribution; the exploration noise comes from `exploration_config`.

    Model-config keys (DDPGConfig fills them): `actor_hiddens`, `actor_hidden_activation`,
    `critic_hiddens`, `critic_hidden_activation` and `twin_q`.
    """

    def setup(self) -> None:
        cfg = self.model_config
        refuse_no_final_linear(cfg, "DDPG and TD3")
        obs_space, space = self._spaces()
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
            raise ConfigError(
                f"DDPG and TD3 need a 1-D Box (continuous) action space, got {space}. "
                "For discrete actions use DQN or SAC."
            )
        obs_dim = flat_obs_dim(obs_space)
        self._flatten = len(obs_space.shape or ()) != 1
        self.action_dim = int(np.prod(space.shape))
        self.twin_q = bool(cfg.get("twin_q", False))
        actor_hiddens, actor_act = cfg.get("actor_hiddens", [400, 300]), cfg.get("actor_hidden_activation", "relu")
        #: The actor and the critic ensemble (None in an inference-only module).
        self.pi: nn.Module
        self.qf: nn.Module | None
        if is_image_space(obs_space, cfg):
            # Image observations: a CNN (conv_filters, post_fcnet_hiddens) in front of the actor and of
            # each critic, then the actor_hiddens / critic_hiddens MLPs.
            self._flatten = True
            self.pi = image_policy(obs_space, cfg, actor_hiddens, actor_act, self.action_dim)
            self.qf = None if self.inference_only else ImageCriticEnsemble(
                2 if self.twin_q else 1, obs_space, cfg, self.action_dim,
                cfg.get("critic_hiddens", [400, 300]), 1, cfg.get("critic_hidden_activation", "relu"))
            return
        # A small output gain starts the actor near the middle of the action range, away from
        # tanh's flat tails where its gradients vanish.
        self.pi = make_mlp(obs_dim, actor_hiddens, actor_act, self.action_dim, out_gain=0.01)
        self.qf = None if self.inference_only else EnsembleMLP(
            2 if self.twin_q else 1, obs_dim + self.action_dim, cfg.get("critic_hiddens", [400, 300]), 1,
            cfg.get("critic_hidden_activation", "relu"),
        )

    def flat_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations as [B, obs_dim] network input."""
        return obs.reshape(obs.shape[0], -1) if self._flatten else obs

    def actions(self, obs: torch.Tensor, pi: nn.Module | None = None) -> torch.Tensor:
        """Deterministic actions in [-1, 1], shape [B, action_dim]; `pi` swaps in e.g. a target actor."""
        net = self.pi if pi is None else pi
        return torch.tanh(net(self.flat_obs(obs)))

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor, qf: nn.Module | None = None) -> torch.Tensor:
        """Q(obs, actions) of every critic, shape [E, B]; `qf` swaps in e.g. the target critics."""
        net = self.qf if qf is None else qf
        if net is None:
            raise ValueError(f"{type(self).__name__} was built inference_only: it has no Q-functions.")
        return net(torch.cat([self.flat_obs(obs), actions], dim=-1)).squeeze(-1)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.actions(batch[Columns.OBS])}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)

    def numpy_inference_fn(self) -> Any:
        """`actions` in NumPy (see RLModule.numpy_inference_fn) for an MLP actor; else None."""
        if not keeps_methods(self, DDPGRLModule, ("forward_inference", "forward_exploration", "actions",
                                                  "flat_obs")):
            return None
        pi = mlp_numpy_fn(self.pi)
        if pi is None:
            return None
        return lambda obs: np.tanh(pi(as_float32_rows(obs)))

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """Deterministic: the distribution inputs are the actions."""
        return BoundDistribution(Deterministic)
