"""ModelCatalog: registered custom models, and the model/distribution/preprocessor a config gets.

RLlib's `ray.rllib.models.ModelCatalog`, for the old API's custom models:

    ModelCatalog.register_custom_model("pa_model", TorchParametricActionsModel)
    config = {"env": ..., "model": {"custom_model": "pa_model", "custom_model_config": {...}}}

`custom_model` is a registered name, a ModelV2 class, or an import path
("package.module:Class" or "package.module.Class"). Algorithms whose default module is
the actor-critic one (PPO) then run the model inside
`rlx.models.modelv2_rl_module.ModelV2RLModule`.

This class is the old API's facade: building models (`get_model_v2`, `get_custom_model_class`)
is done by `rlx.core.models.v2.model_builder`, which the algorithm base runs.

Registrations live in the name registry (`rlx.utils.registry`'s `CUSTOM_MODELS` and
`CUSTOM_ACTION_DISTS`); when Ray Tune is imported they also go into Tune's registry (as
RLlib's do), so trials running in Ray workers find them too.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.core.distributions import (BoundDistribution, check_action_dist_class, custom_action_dist_class,
                                    dist_class_for_space)
from rlx.core.models.v2.model_builder import build_model_v2, custom_model_class
from rlx.core.preprocessors import get_preprocessor
from rlx.utils import registry
from rlx.utils.errors import ConfigError
from rlx.utils.import_hooks import install as _install_tune_hook

__all__ = ["ModelCatalog"]

# Old-API scripts register a custom model and then run `tune.Tuner("PPO", ...)` without
# importing any rlx algorithm: make rlx's algorithms Tune's "PPO", ... as `import rlx.algorithms`
# does (standard library only; Ray is never imported here).
_install_tune_hook()


class ModelCatalog:
    """Registry of custom models (and action distributions); builds a config's model."""

    # The tables of the name registry (rlx.utils.registry), under their old names.
    _custom_models: dict[str, Any] = registry.CUSTOM_MODELS
    _custom_action_dists: dict[str, Any] = registry.CUSTOM_ACTION_DISTS
    #: Registrations shipped (cloudpickled) from the process that started this one, unpickled on
    #: first use: {"custom_models" | "custom_action_dists": {name: bytes}}.
    _shipped: dict[str, dict[str, bytes]] = registry.SHIPPED_CUSTOM

    # ------------------------------------------------------------------ registration

    @staticmethod
    def register_custom_model(model_name: str, model_class: type) -> None:
        """Make `model_class` usable as `model={"custom_model": model_name}`."""
        if not isinstance(model_name, str) or not model_name:
            raise ConfigError(f"register_custom_model needs a non-empty name, got {model_name!r}.")
        if not isinstance(model_class, type):
            raise ConfigError(f"register_custom_model('{model_name}', ...) needs a model class, got {model_class!r}.")
        registry.register_custom_class("custom_models", model_name, model_class)

    @staticmethod
    def register_custom_action_dist(action_dist_name: str, action_dist_class: type) -> None:
        """Make `action_dist_class` (a TorchDistributionWrapper subclass) usable as
        `model={"custom_action_dist": action_dist_name}`."""
        if not isinstance(action_dist_name, str) or not action_dist_name:
            raise ConfigError(f"register_custom_action_dist needs a non-empty name, got {action_dist_name!r}.")
        ModelCatalog._check_action_dist_class(action_dist_class, action_dist_name)
        registry.register_custom_class("custom_action_dists", action_dist_name, action_dist_class)

    @staticmethod
    def _check_action_dist_class(cls: Any, name: str) -> None:
        check_action_dist_class(cls, name)

    @staticmethod
    def get_custom_action_dist_class(custom_action_dist: Any) -> type:
        """The class a `custom_action_dist` setting names (a class, a registered name, an import path)."""
        return custom_action_dist_class(custom_action_dist)

    @staticmethod
    def registered_custom_models() -> list[str]:
        """The names registered in this process."""
        return registry.registered_custom_names("custom_models")

    @staticmethod
    def get_custom_model_class(custom_model: Any) -> type:
        """The class a `custom_model` setting names (a class, a registered name, an import path)."""
        return custom_model_class(custom_model)

    # ------------------------------------------------------------------ building

    @staticmethod
    def get_model_v2(obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                     framework: str = "torch", name: str = "default_model", model_interface: type | None = None,
                     default_model: type | None = None, **model_kwargs: Any) -> Any:
        """Build the model of `model_config`: its `custom_model` (called as
        `cls(obs_space, action_space, num_outputs, model_config, name, **kwargs)` with
        `custom_model_config` merged into `model_kwargs`), else `default_model`, else the
        FullyConnectedNetwork (VisionNetwork for images). `model_interface` adds a mix-in class
        to the model's class. See `rlx.core.models.v2.model_builder.build_model_v2`."""
        return build_model_v2(obs_space, action_space, num_outputs, model_config, framework=framework, name=name,
                              model_interface=model_interface, default_model=default_model, **model_kwargs)

    @staticmethod
    def get_action_dist(action_space: gym.Space, config: dict | None = None, dist_type: Any = None,
                        framework: str = "torch", **kwargs: Any) -> tuple[Any, int]:
        """`(distribution class, number of model outputs it needs)` for an action space."""
        if framework not in ("torch", None):
            raise ConfigError(f"framework={framework!r}: rlx is PyTorch-only; use framework='torch'.")
        config = config or {}
        if dist_type is not None:
            custom: Any = ModelCatalog.get_custom_action_dist_class(dist_type)
            return custom, int(custom.required_input_dim(action_space, config))
        cls, dist_kwargs = dist_class_for_space(action_space, config)
        return BoundDistribution(cls, **dist_kwargs), int(cls.required_input_dim(action_space, config))

    @staticmethod
    def get_preprocessor(env: Any, options: dict | None = None) -> Any:
        """The preprocessor (an instance) of an env's observation space."""
        return ModelCatalog.get_preprocessor_for_space(env.observation_space, options)

    @staticmethod
    def get_preprocessor_for_space(observation_space: gym.Space, options: dict | None = None) -> Any:
        """The preprocessor (an instance) of an observation space."""
        return get_preprocessor(observation_space)(observation_space, options)
