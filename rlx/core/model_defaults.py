"""MODEL_DEFAULTS: the keys of the `model` (a.k.a. `model_config`) dict and their defaults, and
the checks and merging of a model dict (RLlib's path `ray.rllib.models` keeps the names)."""
from __future__ import annotations

import copy
from typing import Any

from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean

__all__ = ["ACTIVATIONS", "MODEL_DEFAULTS", "NEW_STACK_NAMES", "ONLY_WITH", "check_conv_filters",
           "merge_model_config"]

MODEL_DEFAULTS: dict[str, Any] = {
    # Fully connected encoder and heads (the default MLP).
    "fcnet_hiddens": [64, 64],
    "fcnet_activation": "tanh",
    "post_fcnet_hiddens": [],
    "post_fcnet_activation": "relu",
    # Initializers of the hidden layers: a torch.nn.init function or its name, and its kwargs
    # (None: orthogonal with gain sqrt(2), zero biases).
    "fcnet_kernel_initializer": None,
    "fcnet_kernel_initializer_kwargs": None,
    "fcnet_bias_initializer": None,
    "fcnet_bias_initializer_kwargs": None,
    "free_log_std": False,
    # rlx: the initial value of the free log-std parameter (free_log_std=True), as
    # Stable-Baselines3's log_std_init.
    "log_std_init": 0.0,
    "log_std_clip_param": 20.0,
    "vf_share_layers": False,
    "no_final_linear": False,
    # Convolutional encoder (images).
    "conv_filters": None,
    "conv_activation": "relu",
    # Recurrent / attention wrappers.
    "use_lstm": False,
    "max_seq_len": 20,
    "lstm_cell_size": 256,
    "lstm_use_prev_action": False,
    "lstm_use_prev_reward": False,
    "use_attention": False,
    # GTrXL (use_attention): units, widths, memories (steps attended to while acting / training).
    "attention_num_transformer_units": 1,
    "attention_dim": 64,
    "attention_num_heads": 1,
    "attention_head_dim": 32,
    "attention_memory_inference": 50,
    "attention_memory_training": 50,
    "attention_position_wise_mlp_dim": 32,
    "attention_init_gru_gate_bias": 2.0,
    "attention_use_n_prev_actions": 0,
    "attention_use_n_prev_rewards": 0,
    # Image preprocessing (GenericPixelPreprocessor).
    "dim": 84,
    "grayscale": False,
    "zero_mean": True,
    "framestack": True,
    # Custom extensions of the old ModelV2 API. custom_model: a TorchModelV2 (registered name,
    # import path or class) that PPO runs in rlx.models.modelv2_rl_module.ModelV2RLModule.
    "custom_model": None,
    "custom_model_config": {},
    "custom_action_dist": None,
    "custom_preprocessor": None,
}

ACTIVATIONS = ("tanh", "relu", "swish", "silu", "elu", "linear", None)

# Keys whose feature is not built yet: they accept only their default.
_LATER = {
    "custom_preprocessor": "custom preprocessors",
}

# Keys that only matter together with a feature above (in RLlib too): they take any value,
# and with that feature's key left at its default they change nothing.
ONLY_WITH = {
    "conv_activation": "image observations (the CNN)",
    "max_seq_len": "use_lstm or use_attention",
    "lstm_cell_size": "use_lstm",
    "lstm_use_prev_action": "use_lstm",
    "lstm_use_prev_reward": "use_lstm",
    "attention_num_transformer_units": "use_attention",
    "attention_dim": "use_attention",
    "attention_num_heads": "use_attention",
    "attention_head_dim": "use_attention",
    "attention_memory_inference": "use_attention",
    "attention_memory_training": "use_attention",
    "attention_position_wise_mlp_dim": "use_attention",
    "attention_init_gru_gate_bias": "use_attention",
    "framestack": "preprocessor_pref='deepmind' on Atari envs",
    "custom_model_config": "custom_model",
}


def initial_log_std(model_config: dict[str, Any], free_log_std: bool) -> float:
    """The model config's `log_std_init`: the free log-std parameter's starting value.
    NotSupportedYetError when it is set without free_log_std=True (the log-stds are then
    network outputs, which start near 0)."""
    value = float(model_config.get("log_std_init", 0.0) or 0.0)
    if value != 0.0 and not free_log_std:
        raise NotSupportedYetError(f"model['log_std_init']={value!r} without free_log_std=True",
                                   "it sets the free log-std parameter of Box actions",
                                   fix="Add 'free_log_std': True to the model config, or remove log_std_init.")
    return value


def check_conv_filters(filters: Any) -> list[list[Any]]:
    """`conv_filters` checked: a non-empty list of [out_channels, [kernel_h, kernel_w] or k, stride] layers,
    optionally with a 4th item, the padding ("same" or "valid"), as the new API stack writes them."""
    layers = []
    layer: Any  # the user's layer, checked below (None: no layers given)
    for layer in filters if isinstance(filters, (list, tuple)) and filters else [None]:
        ok = isinstance(layer, (list, tuple)) and len(layer) in (3, 4)
        if ok:
            out, kernel, stride = layer[:3]
            kernel = [kernel, kernel] if isinstance(kernel, int) else list(kernel)
            stride = [stride, stride] if isinstance(stride, int) else list(stride)
            ok = isinstance(out, int) and out > 0 and len(kernel) == 2 and len(stride) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in kernel + stride)
            ok = ok and (len(layer) == 3 or layer[3] in ("same", "valid"))
        if not ok:
            raise ConfigError(
                "model['conv_filters'] must be a non-empty list of [out_channels, [kernel_h, kernel_w], stride"
                "(, 'same'|'valid')] layers, e.g. [[16, [8, 8], 4], [32, [4, 4], 2]]; got {filters!r}.")
        layers.append([out, kernel, stride] + list(layer[3:]))
    return layers


def _check_hiddens(key: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in value
    ):
        raise ConfigError(f"model['{key}'] must be a list of positive layer sizes, got {value!r}.")
    return list(value)


#: DefaultModelConfig field names that are other keys of rlx's model dict.
NEW_STACK_NAMES = {"head_fcnet_hiddens": "post_fcnet_hiddens", "head_fcnet_activation": "post_fcnet_activation"}


def merge_model_config(base: dict[str, Any] | None, update: dict[str, Any],
                       custom_keys: bool = False) -> dict[str, Any]:
    """Return `base` (MODEL_DEFAULTS when None) updated with `update`, validating every key.

    With `custom_keys` (the model_config of an RLModule class of the user's, which reads keys of
    its own), keys rlx does not know are kept as they are instead of refused.
    """
    merged = copy.deepcopy(MODEL_DEFAULTS if base is None else base)
    for key, value in update.items():
        # The new API stack's names (DefaultModelConfig fields given as a plain dict).
        key = NEW_STACK_NAMES.get(key, key)
        if key not in MODEL_DEFAULTS and custom_keys:
            merged[key] = value
            continue
        if key not in MODEL_DEFAULTS:
            raise ConfigError(
                f"Unknown model config key '{key}'.{did_you_mean(key, MODEL_DEFAULTS)} "
                f"Known keys: {', '.join(sorted(MODEL_DEFAULTS))}."
            )
        if key in ("fcnet_hiddens", "post_fcnet_hiddens"):
            value = _check_hiddens(key, value)
        elif key in ("fcnet_activation", "post_fcnet_activation", "conv_activation"):
            if value not in ACTIVATIONS:
                raise ConfigError(
                    f"model['{key}'] must be one of {', '.join(map(repr, ACTIVATIONS))}; got {value!r}."
                )
        elif key in ("free_log_std", "vf_share_layers", "grayscale", "zero_mean", "framestack", "no_final_linear"):
            if not isinstance(value, bool):
                raise ConfigError(f"model['{key}'] must be True or False, got {value!r}.")
        elif key in ("max_seq_len", "lstm_cell_size", "dim", "attention_num_transformer_units", "attention_dim",
                     "attention_num_heads", "attention_head_dim", "attention_memory_inference",
                     "attention_memory_training", "attention_position_wise_mlp_dim"):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"model['{key}'] must be a positive integer, got {value!r}.")
        elif key == "attention_init_gru_gate_bias":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"model['{key}'] must be a number, got {value!r}.")
        elif key in ("attention_use_n_prev_actions", "attention_use_n_prev_rewards"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"model['{key}'] must be a non-negative integer, got {value!r}.")
        elif key == "log_std_init":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -20.0 <= value <= 20.0:
                raise ConfigError(f"model['log_std_init'] must be a number in [-20, 20], got {value!r}.")
        elif key == "log_std_clip_param":
            if not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"model['{key}'] must be a positive number, got {value!r}.")
        elif key == "conv_filters" and value is not None:
            value = check_conv_filters(value)
        elif key == "custom_action_dist" and not (value is None or isinstance(value, (str, type))):
            raise ConfigError(
                "model['custom_action_dist'] must be a name given to ModelCatalog.register_custom_action_dist, an "
                f"import path or a TorchDistributionWrapper subclass, got {value!r}.")
        elif key == "custom_model_config" and not isinstance(value, dict):
            raise ConfigError(f"model['custom_model_config'] must be a dict, got {value!r}.")
        elif key == "custom_model" and not (value is None or isinstance(value, (str, type))):
            raise ConfigError(
                f"model['custom_model'] must be a name given to ModelCatalog.register_custom_model, an import "
                f"path or a ModelV2 class, got {value!r}."
            )
        if key in _LATER and value != MODEL_DEFAULTS[key]:
            raise NotSupportedYetError(f"model['{key}']", _LATER[key])
        merged[key] = copy.deepcopy(value)
    return merged
