"""Build an old-API ModelV2 from a model config: the live part of RLlib's `ModelCatalog`.

`custom_model_class` resolves `model["custom_model"]` (a class, a name registered with
`ModelCatalog.register_custom_model`, or an import path) and `build_model_v2` constructs the
config's model (its custom model, else the default VisionNetwork / FullyConnectedNetwork, inside
an LSTMWrapper with `use_lstm`). `ModelCatalog` (`rlx.models.catalog`, the old API's facade) and
the algorithm base's `ModelV2RLModule` both call them; registrations live in the name registry
(`rlx.utils.registry`).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.core.cnn import is_image_space
from rlx.core.model_defaults import MODEL_DEFAULTS
from rlx.core.models.v2.fcnet import FullyConnectedNetwork
from rlx.core.models.v2.recurrent_net import LSTMWrapper
from rlx.core.models.v2.visionnet import VisionNetwork
from rlx.utils import registry
from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean

__all__ = ["build_model_v2", "custom_model_class"]


def custom_model_class(custom_model: Any) -> type:
    """The class a `custom_model` setting names (a class, a registered name, an import path)."""
    if isinstance(custom_model, type):
        return custom_model
    if not isinstance(custom_model, str) or not custom_model:
        raise ConfigError(f"model['custom_model'] must be a registered name or a model class, got {custom_model!r}.")
    cls = registry.find_custom_class("custom_models", custom_model)
    if cls is None and ("." in custom_model or ":" in custom_model):
        try:
            cls = registry.import_object(custom_model)
        except Exception as err:  # noqa: BLE001 - reported below with the name
            raise ConfigError(f"model['custom_model']={custom_model!r} could not be imported: {err}") from err
    if cls is None:
        known = registry.registered_custom_names("custom_models")
        raise ConfigError(
            f"Unknown custom model '{custom_model}'.{did_you_mean(custom_model, known)} Register it first with "
            "ModelCatalog.register_custom_model(name, ModelClass)"
            + (f" (registered: {', '.join(known)})." if known else ".")
            + " Names registered in the driver reach the processes and Ray actors rlx starts (registered before "
            "the Algorithm is built) and Ray Tune trials; a class that cannot be pickled does not: give an "
            "import path 'package.module:ModelClass' then."
        )
    return cls


def build_model_v2(obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                   framework: str = "torch", name: str = "default_model", model_interface: type | None = None,
                   default_model: type | None = None, **model_kwargs: Any) -> Any:
    """Build the model of `model_config`: its `custom_model` (called as
    `cls(obs_space, action_space, num_outputs, model_config, name, **kwargs)` with
    `custom_model_config` merged into `model_kwargs`), else `default_model`, else the
    VisionNetwork (image observations) or FullyConnectedNetwork. `model_interface` adds a mix-in
    class to the model's class; `use_lstm` wraps the model in an LSTMWrapper."""
    if framework not in ("torch", None):
        raise ConfigError(f"framework={framework!r}: rlx is PyTorch-only; use framework='torch'.")
    config = {**MODEL_DEFAULTS, **(model_config or {})}
    custom = config.get("custom_model")
    if custom:
        cls = custom_model_class(custom)
        kwargs = {**model_kwargs, **(config.get("custom_model_config") or {})}
    else:
        if default_model is not None:
            cls = default_model
        elif is_image_space(obs_space, config):
            cls = VisionNetwork
        else:
            cls = FullyConnectedNetwork
        kwargs = dict(model_kwargs)
    if config.get("use_attention"):
        raise NotSupportedYetError("use_attention with ModelV2 models", "attention around old-API ModelV2s",
                                   fix="Leave custom_model unset to get the default attention module, or use "
                                       "use_lstm=True.")
    if model_interface is not None and not issubclass(cls, model_interface):
        cls = type(f"{cls.__name__}_as_{model_interface.__name__}", (cls, model_interface), {})
    if config.get("use_lstm"):
        if not num_outputs:
            raise ConfigError("use_lstm wraps the model in an LSTM whose action branch has num_outputs outputs; "
                              f"get_model_v2 got num_outputs={num_outputs!r}: pass the action distribution's "
                              "input width.")
        # The wrapped model outputs its features (num_outputs=None); the LSTM's branches the outputs.
        wrapped = _construct(cls, obs_space, action_space, None, config, name, kwargs)
        return LSTMWrapper(wrapped, obs_space, action_space, num_outputs, config, f"{name}_lstm")
    return _construct(cls, obs_space, action_space, num_outputs, config, name, kwargs)


def _construct(cls: type, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
               config: dict, name: str, kwargs: dict[str, Any]) -> Any:
    """`cls(...)`, with a ConfigError naming custom_model_config when its keys do not fit."""
    try:
        model = cls(obs_space, action_space, num_outputs, config, name, **kwargs)
    except TypeError as err:
        if kwargs and ("unexpected keyword" in str(err) or "positional argument" in str(err)):
            raise ConfigError(
                f"{cls.__name__}(obs_space, action_space, num_outputs, model_config, name, **{sorted(kwargs)}) "
                f"failed: {err}. Keys of model['custom_model_config'] are passed to the model's constructor."
            ) from err
        raise
    return model
