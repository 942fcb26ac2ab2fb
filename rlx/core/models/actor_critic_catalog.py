"""ActorCriticCatalog: the catalog of rlx's default actor-critic module (rlx.core.models.ActorCriticModule),
which PPO, APPO, IMPALA, A2C and PG train. `rlx.algorithms.ppo.ppo_catalog.PPOCatalog` is it under
RLlib's name.

Layout (kept from rlx's checkpoints): with `vf_share_layers=True` the actor-critic encoder is one
trunk (`fcnet_hiddens`, then `post_fcnet_hiddens`, or a CNN) and the pi and vf heads are one
linear layer each on it. Without it there is no shared encoder (`build_actor_critic_encoder`
returns None and `latent_dims` is the observation's width) and each head is a whole network of
its own: an MLP of the hidden layers and the output layer, or a CNN and the output layer.
"""
from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
from torch import nn

from rlx.core.cnn import ImageEncoder, is_image_space
from rlx.core.distributions import DiagGaussian, dist_class_for_space
from rlx.core.catalog import INIT_KEYS, Catalog, EncoderConfig, check_framework
from rlx.core.mlp import make_mlp
from rlx.core.model_defaults import initial_log_std
from rlx.utils.errors import NotSupportedYetError

__all__ = ["ActorCriticCatalog"]

#: Output-layer gains: small policy logits, unit-scale values.
PI_OUT_GAIN = 0.01
VF_OUT_GAIN = 1.0


class ActorCriticCatalog(Catalog):
    """Builds the actor-critic encoder and the policy (pi) and value (vf) heads.

    Attributes set from the model config: `vf_share_layers`, `free_log_std` (Box actions: the
    log standard deviations are a free parameter, so the pi head outputs only the means),
    `log_std_init` (that parameter's initial value),
    `no_final_linear`, and `pi_head_output_dim` (the width the pi head must output).
    """

    def _determine_components_hook(self) -> None:
        super()._determine_components_hook()
        cfg = self._model_config_dict
        self.vf_share_layers = bool(cfg.get("vf_share_layers", False))
        dist_cls, _ = dist_class_for_space(self.action_space, cfg)
        if cfg.get("free_log_std", False) and dist_cls is not DiagGaussian:
            raise NotSupportedYetError("model['free_log_std']=True", "it applies to Box action spaces only")
        self.free_log_std = bool(cfg.get("free_log_std", False))
        self.log_std_init = initial_log_std(cfg, self.free_log_std)
        out_dim = dist_cls.required_input_dim(self.action_space, cfg)
        self.pi_head_output_dim = out_dim // 2 if self.free_log_std else out_dim
        self.no_final_linear = bool(cfg.get("no_final_linear", False))
        if self.no_final_linear and self._encoder_config.is_image:
            raise NotSupportedYetError("model['no_final_linear'] with image observations",
                                       "it applies to the fully connected network of vector observations")

    @classmethod
    def _get_encoder_config(cls, observation_space: gym.Space, model_config_dict: dict[str, Any],
                            action_space: gym.Space | None = None) -> EncoderConfig:
        config = super()._get_encoder_config(observation_space, model_config_dict, action_space)
        if "fcnet_hiddens" not in config.model_config:
            config.hiddens = [64, 64]
        return config

    # ------------------------------------------------------------------ layout

    def _pi_layers(self) -> tuple[list[int], list[int]]:
        """(hiddens, post_hiddens) of the policy network. With no_final_linear (RLlib's meaning)
        the last hidden layer gets the output width and is the policy output."""
        enc = self._encoder_config
        hiddens, post = list(enc.hiddens), list(enc.post_hiddens)
        if not self.no_final_linear:
            return hiddens, post
        if post:
            return hiddens, post[:-1] + [self.pi_head_output_dim]
        return hiddens[:-1] + [self.pi_head_output_dim], post

    @property
    def latent_dims(self) -> tuple[int, ...]:
        """Width of the features the heads read: the shared trunk's output, or (without
        vf_share_layers) the flattened observation."""
        if self._latent_dims is None:
            enc = self._encoder_config
            if not self.vf_share_layers:
                self._latent_dims = (tuple(enc.input_space.shape) if is_image_space(enc.input_space, enc.model_config)
                                     else (enc.input_dim,))
            elif enc.is_image:
                self._latent_dims = tuple(enc.output_dims)
            else:
                hiddens, post = self._pi_layers()
                self._latent_dims = ((hiddens + post)[-1] if hiddens + post else enc.input_dim,)
        return self._latent_dims

    @latent_dims.setter
    def latent_dims(self, value: tuple[int, ...]) -> None:
        self._latent_dims = tuple(value)

    # ------------------------------------------------------------------ builders

    def build_actor_critic_encoder(self, framework: str = "torch") -> nn.Module | None:
        """The trunk both heads share (vf_share_layers=True), else None (each head reads the observation)."""
        check_framework(framework)
        if not self.vf_share_layers:
            return None
        enc = self._encoder_config
        if enc.is_image:
            return enc.build(framework)
        hiddens, post = self._pi_layers()
        return self._mlp(hiddens, post, None)

    def build_encoder(self, framework: str = "torch") -> nn.Module:
        """The shared trunk (see build_actor_critic_encoder); without vf_share_layers, one trunk of
        the same layout (RLlib's actor-critic modules build theirs with build_actor_critic_encoder)."""
        check_framework(framework)
        return self._encoder_config.build(framework)

    def build_pi_head(self, framework: str = "torch") -> nn.Module:
        """The policy head: latent features -> `pi_head_output_dim` action-distribution inputs."""
        check_framework(framework)
        return self._head(self.pi_head_output_dim, PI_OUT_GAIN, policy=True)

    def build_vf_head(self, framework: str = "torch") -> nn.Module:
        """The value head: latent features -> one value."""
        check_framework(framework)
        return self._head(1, VF_OUT_GAIN, policy=False)

    def _head(self, out_dim: int, gain: float, policy: bool) -> nn.Module:
        enc = self._encoder_config
        no_final = policy and self.no_final_linear
        if self.vf_share_layers:
            if no_final:
                return nn.Identity()
            return make_mlp(self.latent_dims[0], [], None, out_dim, out_gain=gain)
        if enc.is_image:
            encoder = cast(ImageEncoder, enc.build())  # enc.is_image: build() made an ImageEncoder
            return nn.Sequential(encoder, make_mlp(encoder.out_dim, [], None, out_dim, out_gain=gain))
        hiddens, post = self._pi_layers() if policy else (list(enc.hiddens), list(enc.post_hiddens))
        return self._mlp(hiddens, post, None if no_final else out_dim, gain)

    def _mlp(self, hiddens: list[int], post: list[int], out_dim: int | None, gain: float = 1.0) -> nn.Module:
        enc = self._encoder_config
        return make_mlp(enc.input_dim, hiddens, enc.activation, out_dim, out_gain=gain, post_hiddens=post,
                        post_activation=enc.post_activation,
                        initializers={k: enc.model_config.get(k) for k in INIT_KEYS})
