"""Catalog: decides which networks and which action distribution an RLModule gets from its
spaces and model config (RLlib's `ray.rllib.core.models.catalog.Catalog`).

A Catalog is built with `(observation_space, action_space, model_config_dict)`. Its
`_determine_components_hook()` picks the encoder recipe (an MLP over flat observations, or a
CNN over images) and the action-distribution class; `build_encoder(framework)` and
`get_action_dist_cls(framework)` return them. Subclass it (or an algorithm's catalog, such as
`rlx.algorithms.ppo.ppo_catalog.PPOCatalog`) and override a `build_*` method to change one
part of a default module, then pass the class as `RLModuleSpec(catalog_class=...)`.

The networks come from rlx's builders (`rlx.core.mlp.make_mlp`, `rlx.core.cnn.ImageEncoder`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from rlx.core.cnn import ImageEncoder, is_image_space
from rlx.core.distributions import BoundDistribution, dist_class_for_space
from rlx.core.mlp import flat_obs_dim, make_mlp
from rlx.core.rl_module.default_model_config import DefaultModelConfig, model_dict
from rlx.utils.errors import ConfigError, NotSupportedYetError

__all__ = ["Catalog", "EncoderConfig"]

#: Model-dict keys of the fully connected layers' initialization (see rlx.core.models.make_mlp).
INIT_KEYS = ("fcnet_kernel_initializer", "fcnet_kernel_initializer_kwargs", "fcnet_bias_initializer",
             "fcnet_bias_initializer_kwargs")


def check_framework(framework: str) -> None:
    """NotSupportedYetError unless `framework` is "torch" (rlx builds PyTorch networks only)."""
    if framework != "torch":
        raise NotSupportedYetError(f"framework={framework!r} in a Catalog", "rlx builds PyTorch networks only",
                                   fix='Pass framework="torch".')


def model_config_as_dict(model_config: Any) -> dict[str, Any]:
    """The model dict of a dict, a DefaultModelConfig or None."""
    if model_config is None:
        return {}
    if isinstance(model_config, dict):
        return dict(model_config)

    if isinstance(model_config, DefaultModelConfig):
        return model_dict(model_config)
    raise ConfigError(f"A model config must be a dict or a DefaultModelConfig, got {model_config!r:.80}.")


@dataclasses.dataclass
class EncoderConfig:
    """The recipe of an encoder: the space it reads and the layers that turn it into features.

    Image spaces (see rlx.core.cnn.is_image_space) get a CNN followed by `post_hiddens`; other
    Box spaces an MLP `hiddens (activation) -> post_hiddens (post_activation)`. An MLP with no
    layers is the identity (its features are the flattened observation).
    """

    input_space: gym.Space
    model_config: dict[str, Any]
    hiddens: list[int]
    activation: str | None = "tanh"
    post_hiddens: list[int] = dataclasses.field(default_factory=list)
    post_activation: str | None = "relu"

    @property
    def is_image(self) -> bool:
        """Whether the encoder is a CNN."""
        return is_image_space(self.input_space, self.model_config)

    @property
    def input_dim(self) -> int:
        """Width of the flattened observation an MLP encoder reads."""
        return flat_obs_dim(self.input_space)

    @property
    def output_dims(self) -> tuple[int, ...]:
        """Shape of one feature vector the encoder outputs."""
        if is_image_space(self.input_space, self.model_config):  # self.is_image, narrowing the space to a Box
            # The CNN's width follows from its filters; build one on the side without consuming
            # the global RNG, so the real networks are initialized as without this query.
            with torch.random.fork_rng(devices=[]):
                return (ImageEncoder(self.input_space, self.model_config).out_dim,)
        layers = list(self.hiddens) + list(self.post_hiddens)
        return (layers[-1] if layers else self.input_dim,)

    def build(self, framework: str = "torch") -> nn.Module:
        """The encoder network."""
        check_framework(framework)
        if is_image_space(self.input_space, self.model_config):  # self.is_image, narrowing the space to a Box
            return ImageEncoder(self.input_space, self.model_config)

        return make_mlp(self.input_dim, self.hiddens, self.activation, post_hiddens=self.post_hiddens,
                        post_activation=self.post_activation,
                        initializers={k: self.model_config.get(k) for k in INIT_KEYS})


class Catalog:
    """Picks and builds the parts of an RLModule from its spaces and model config.

    Args:
        observation_space: the space the module's networks read.
        action_space: the action space the module's distribution covers.
        model_config_dict: the model settings (a dict or a DefaultModelConfig).
        view_requirements: accepted for RLlib compatibility; unused.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        model_config_dict: Any,
        view_requirements: Any = None,
    ):
        self.observation_space = observation_space
        self.action_space = action_space
        self._model_config_dict = model_config_as_dict(model_config_dict)
        self._view_requirements = view_requirements
        self._latent_dims: tuple[int, ...] | None = None
        self._determine_components_hook()

    @property
    def model_config_dict(self) -> dict[str, Any]:
        """The model settings this catalog builds from."""
        return self._model_config_dict

    def _determine_components_hook(self) -> None:
        """Decide the components (override to change them): the encoder recipe
        (`self._encoder_config`) and the action-distribution function (`self._action_dist_class_fn`).
        `latent_dims` follows from the encoder recipe unless a subclass sets it."""
        self._encoder_config = self._get_encoder_config(
            observation_space=self.observation_space, model_config_dict=self._model_config_dict,
            action_space=self.action_space)
        model_config = self._model_config_dict

        def action_dist_class_fn(framework: str = "torch") -> BoundDistribution:
            check_framework(framework)
            cls, kwargs = dist_class_for_space(self.action_space, model_config)
            return BoundDistribution(cls, **kwargs)

        self._action_dist_class_fn = action_dist_class_fn

    @property
    def latent_dims(self) -> tuple[int, ...]:
        """Shape of the encoder's output features (what heads read)."""
        if self._latent_dims is None:
            self._latent_dims = tuple(self._encoder_config.output_dims)
        return self._latent_dims

    @latent_dims.setter
    def latent_dims(self, value: tuple[int, ...]) -> None:
        self._latent_dims = tuple(value)

    def build_encoder(self, framework: str = "torch") -> nn.Module:
        """The encoder: observations -> feature vectors of `latent_dims`."""
        check_framework(framework)
        return self._encoder_config.build(framework)

    def get_action_dist_cls(self, framework: str = "torch") -> BoundDistribution:
        """The action-distribution class for the action space (callable on the module's
        `action_dist_inputs`, and with `from_logits`)."""
        return self._action_dist_class_fn(framework=framework)

    @classmethod
    def _get_encoder_config(
        cls,
        observation_space: gym.Space,
        model_config_dict: dict[str, Any],
        action_space: gym.Space | None = None,
    ) -> EncoderConfig:
        """The encoder recipe for `observation_space`: a CNN for images, else an MLP of
        `fcnet_hiddens` then `post_fcnet_hiddens`."""
        cfg = model_config_as_dict(model_config_dict)
        for key in ("use_lstm", "use_attention"):
            if cfg.get(key):
                raise NotSupportedYetError(
                    f"model['{key}'] in a Catalog", "catalogs build the feed-forward encoders (MLP, CNN); rlx's "
                    "recurrent modules build their own networks", fix=f"Leave {key}=False when using catalog_class.")
        return EncoderConfig(
            input_space=observation_space, model_config=cfg,
            hiddens=list(cfg.get("fcnet_hiddens", [256, 256])), activation=cfg.get("fcnet_activation", "tanh"),
            post_hiddens=list(cfg.get("post_fcnet_hiddens") or []),
            post_activation=cfg.get("post_fcnet_activation", "relu"))

    @classmethod
    def _get_dist_cls_from_action_space(cls, action_space: gym.Space, *, framework: str = "torch") -> BoundDistribution:
        """The default action-distribution class of `action_space` (default model settings)."""
        check_framework(framework)
        dist_cls, kwargs = dist_class_for_space(action_space, {})
        return BoundDistribution(dist_cls, **kwargs)
