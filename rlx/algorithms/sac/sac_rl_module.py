"""SAC's networks: a stochastic policy and (twin) Q-functions, for Box and Discrete actions."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.action_masking import find_action_mask
from rlx.core.catalog import INIT_KEYS
from rlx.core.cnn import is_image_space
from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, Categorical, SquashedGaussian
from rlx.core.flat_image_encoders import ImageCriticEnsemble, image_policy
from rlx.core.models import EnsembleMLP, flat_obs_dim, make_mlp, refuse_no_final_linear
from rlx.core.numpy_forward import as_float32_rows, keeps_methods, mlp_numpy_fn
from rlx.core.rl_module.rl_module import RLModule
from rlx.utils.errors import ConfigError, NotSupportedYetError


class SACRLModule(RLModule):
    """Policy `pi` and critic ensemble `qf` (2 members with twin_q).

    Box actions: `pi` outputs [mean, log_std] of a tanh-squashed Gaussian over [-1, 1]
    (the EnvRunner maps that onto the action bounds) and `qf` reads (obs, action).
    Discrete actions: `pi` outputs logits and `qf` outputs one Q-value per action.
    Model-config keys (SACConfig fills them): `policy_model_config` and `q_model_config`
    dicts with `fcnet_hiddens`, `fcnet_activation` and optionally the hidden layers'
    `fcnet_kernel_initializer`/`fcnet_bias_initializer` (and `_kwargs`), and `twin_q`.
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
        if self.discrete and find_action_mask(obs_space, space, cfg) is not None:
            raise NotSupportedYetError("action masking with SAC", "the default modules of PPO and DQN mask actions",
                                       fix="Use PPO or DQN for envs with an action mask in the observation.")
        obs_dim = flat_obs_dim(obs_space)
        self._flatten = len(obs_space.shape or ()) != 1
        pi_cfg = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu", **(cfg.get("policy_model_config") or {})}
        q_cfg = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu", **(cfg.get("q_model_config") or {})}
        pi_out = self.action_dim if self.discrete else 2 * self.action_dim
        self.twin_q = bool(cfg.get("twin_q", True))
        q_out = self.action_dim if self.discrete else 1
        #: The policy network and the critic ensemble (None in an inference-only module).
        self.pi: torch.nn.Module
        self.qf: torch.nn.Module | None
        if is_image_space(obs_space, cfg):
            # Image observations: a CNN (conv_filters, post_fcnet_hiddens) in front of the policy and of
            # each critic; the MLPs after it are sized by policy_model_config and q_model_config.
            self._flatten = True
            self.pi = image_policy(obs_space, cfg, pi_cfg["fcnet_hiddens"], pi_cfg["fcnet_activation"],
                                   pi_out)
            self.qf = None if self.inference_only else ImageCriticEnsemble(
                2 if self.twin_q else 1, obs_space, cfg, 0 if self.discrete else self.action_dim,
                q_cfg["fcnet_hiddens"], q_out, q_cfg["fcnet_activation"])
            return
        # PyTorch's default init, as RLlib's and SB3's SAC: on HalfCheetah it learned faster than
        # the orthogonal init rlx's PPO uses (docs/performance.md, the SAC HalfCheetah row).
        self.pi = make_mlp(obs_dim, [], None, pi_out, post_hiddens=pi_cfg["fcnet_hiddens"],
                           post_activation=pi_cfg["fcnet_activation"],
                           initializers={k: pi_cfg.get(k) for k in INIT_KEYS}, layer_init="torch")
        q_in = obs_dim if self.discrete else obs_dim + self.action_dim
        self.qf = None if self.inference_only else EnsembleMLP(
            2 if self.twin_q else 1, q_in, q_cfg["fcnet_hiddens"], q_out, q_cfg["fcnet_activation"],
            initializers={k: q_cfg.get(k) for k in INIT_KEYS},
        )

    def flat_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations [B, ...] as the MLPs read them: [B, obs_dim]."""
        return obs.reshape(obs.shape[0], -1) if self._flatten else obs

    def policy_outputs(self, obs: torch.Tensor) -> torch.Tensor:
        """Action-distribution inputs: [mean, log_std] (Box) or logits (Discrete)."""
        out = self.pi(self.flat_obs(obs))
        if self.discrete:
            return out
        mean, log_std = out.chunk(2, dim=-1)
        # Bound log_std as SAC implementations do, so exp() neither vanishes nor explodes.
        return torch.cat([mean, log_std.clamp(-20.0, 2.0)], dim=-1)

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor | None = None) -> torch.Tensor:
        """Critic outputs: [E, B] for Box (given actions), [E, B, n] for Discrete."""
        if self.qf is None:
            raise ValueError(f"{type(self).__name__} was built inference_only: it has no Q-functions.")
        obs = self.flat_obs(obs)
        if self.discrete:
            return self.qf(obs)
        if actions is None:
            raise ValueError("q_values() of a Box action space needs the actions.")
        return self.qf(torch.cat([obs, actions], dim=-1)).squeeze(-1)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.policy_outputs(batch[Columns.OBS])}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)

    def numpy_inference_fn(self) -> Any:
        """policy_outputs in NumPy (see RLModule.numpy_inference_fn) for an MLP policy; else None."""
        if not keeps_methods(self, SACRLModule, ("forward_inference", "forward_exploration", "policy_outputs",
                                                 "flat_obs")):
            return None
        pi = mlp_numpy_fn(self.pi)
        if pi is None:
            return None
        discrete, n = self.discrete, self.action_dim

        def forward(obs: np.ndarray) -> np.ndarray:
            out = pi(as_float32_rows(obs))
            if not discrete:
                np.clip(out[:, n:], -20.0, 2.0, out=out[:, n:])
            return out

        return forward

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch)

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """SquashedGaussian for Box actions, Categorical for Discrete."""
        return BoundDistribution(Categorical) if self.discrete else BoundDistribution(SquashedGaussian)
