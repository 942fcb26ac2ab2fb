"""ModelV2: the old API's custom-model interface (RLlib's `ray.rllib.models.modelv2`).

A ModelV2 maps an `input_dict` (with `"obs"`, the observation in its original structure,
and `"obs_flat"`, the preprocessed flat vector) to the action-distribution inputs and,
through `value_function()`, the state values of the last forward pass. rlx runs a
ModelV2 inside an RLModule (`rlx.models.modelv2_rl_module.ModelV2RLModule`) when the
config names it in `model={"custom_model": ...}`; see `rlx.models.catalog.ModelCatalog`.
The class lives in the core (the Learner checks for a model's `custom_loss`); RLlib's path
`rlx.models.modelv2` is an alias of this module's names.

rlx's EnvRunners hand models the flat, preprocessed observation. Its space is a Box that
remembers the env's space as `original_space`; `restore_original_dimensions` cuts the
flat tensor back into that structure (Dict -> dict, Tuple -> tuple, Discrete -> one-hot,
Box -> its shape), as RLlib does.
"""
from __future__ import annotations

import contextlib
from typing import Any

import gymnasium as gym
import numpy as np

from rlx.core.preprocessors import get_preprocessor

__all__ = ["ModelV2", "flatten", "restore_original_dimensions"]


class ModelV2:
    """Base class of old-API custom models. Subclass `TorchModelV2` (and `torch.nn.Module`).

    Args:
        obs_space: the (preprocessed) observation space; `obs_space.original_space` is the
            env's own space when preprocessing changed it.
        action_space: the env's action space.
        num_outputs: width of the action-distribution inputs the model must return.
        model_config: the `model` config dict (`custom_model_config` holds the user's own keys).
        name: a name for the model (used in error messages).
        framework: "torch" (rlx is PyTorch-only).
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str, framework: str = "torch"):
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = model_config
        self.name = name or "default_model"
        self.framework = framework
        self.time_major = bool((model_config or {}).get("_time_major", False))
        self.view_requirements: dict[str, Any] = {}
        self._last_output: Any = None

    def get_initial_state(self) -> list:
        """The initial recurrent state (empty: a feed-forward model)."""
        return []

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[Any, list]:
        """Return `(outputs [B, num_outputs], new state)` for `input_dict["obs"]` /
        `input_dict["obs_flat"]`. Implement this in subclasses."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward(input_dict, state, seq_lens).")

    def value_function(self) -> Any:
        """The state values [B] of the last forward() call."""
        raise NotImplementedError(
            f"{type(self).__name__} has no value_function(); algorithms with a critic (PPO) need one."
        )

    def custom_loss(self, policy_loss: Any, loss_inputs: Any) -> Any:
        """Return the policy losses (a list, one per optimizer) changed by a loss of the model's own;
        `loss_inputs` is the train batch. rlx's Learners call it on every loss they step, and log
        the model's `metrics()` into the learner results."""
        return policy_loss

    def metrics(self) -> dict:
        """Extra metrics of the model."""
        return {}

    def __call__(self, input_dict: dict, state: list | None = None, seq_lens: Any = None) -> tuple[Any, list]:
        """Forward `input_dict` with its observation restored to the original structure
        (`"obs"`) and flattened (`"obs_flat"`); returns `(outputs, state)`."""
        restored = dict(input_dict)
        obs = input_dict["obs"]
        if self.framework == "torch" and isinstance(obs, np.ndarray):
            import torch

            # NumPy observations (the seeds' `policy.model({"obs": np.array([...])})`) as float tensors.
            obs = restored["obs"] = torch.as_tensor(obs, dtype=torch.float32)
        if isinstance(obs, (dict, tuple, list)):
            restored["obs_flat"] = _flatten_structure(obs)
        else:
            restored["obs"] = restore_original_dimensions(obs, self.obs_space)
            restored["obs_flat"] = flatten(obs) if getattr(obs, "ndim", 2) > 2 else obs
        restored.setdefault("is_training", False)
        result = self.forward(restored, list(state or []), seq_lens)
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise ValueError(f"{type(self).__name__}.forward() must return (outputs, state), got {type(result).__name__}.")
        outputs, new_state = result
        if self.num_outputs is not None and getattr(outputs, "ndim", None) == 2 \
                and outputs.shape[-1] != self.num_outputs:
            raise ValueError(f"{type(self).__name__}.forward() returned outputs of width {outputs.shape[-1]}, "
                             f"but num_outputs is {self.num_outputs}.")
        self._last_output = outputs
        return outputs, list(new_state or [])

    def from_batch(self, train_batch: dict, is_training: bool = True) -> tuple[Any, list]:
        """Forward a (Sample)batch: its `"obs"`, and its recurrent state from `"state_in_0"`,
        `"state_in_1"`, ... and `"seq_lens"` when present; returns `(outputs, state)`."""
        input_dict = dict(train_batch)
        input_dict["is_training"] = is_training
        states: list[Any] = []
        while f"state_in_{len(states)}" in input_dict:
            states.append(input_dict[f"state_in_{len(states)}"])
        return self(input_dict, states, input_dict.get("seq_lens"))

    def import_from_h5(self, h5_file: str) -> None:
        """Load weights from an h5 file (`Algorithm.import_model` calls it). By default the file's
        datasets, their paths written with dots, must be the model's `state_dict()` names; override
        it to read another layout (e.g. a Keras model's `save_weights` file)."""
        from rlx.utils.weights_io import load_h5_weights  # (torch, h5py: imported when used)

        load_h5_weights(self, h5_file)  # type: ignore[arg-type]

    def last_output(self) -> Any:
        """The outputs of the last forward() call."""
        return self._last_output

    def context(self) -> contextlib.AbstractContextManager:
        """A context for the model's computations (nothing to enter in PyTorch)."""
        return contextlib.nullcontext()

    def variables(self, as_dict: bool = False) -> Any:
        """The model's variables (a list, or a name -> tensor dict)."""
        raise TypeError(f"{type(self).__name__} is a framework-neutral ModelV2; subclass TorchModelV2, whose "
                        "variables() lists the torch parameters.")

    def trainable_variables(self, as_dict: bool = False) -> Any:
        """The model's trainable variables."""
        raise TypeError(f"{type(self).__name__} is a framework-neutral ModelV2; subclass TorchModelV2, whose "
                        "trainable_variables() lists the torch parameters that require gradients.")

    def is_time_major(self) -> bool:
        """Whether recurrent inputs are [T, B, ...] (else [B, T, ...])."""
        return self.time_major


def flatten(obs: Any, framework: str = "torch") -> Any:
    """`obs` [B, ...] reshaped to [B, -1]."""
    return obs.reshape(obs.shape[0], -1)


def _flatten_structure(obs: Any) -> Any:
    import torch

    if isinstance(obs, dict):
        leaves = [_flatten_structure(obs[k]) for k in obs]
    elif isinstance(obs, (tuple, list)):
        leaves = [_flatten_structure(o) for o in obs]
    else:
        t = torch.as_tensor(obs)
        return t.reshape(t.shape[0], -1).float()
    return torch.cat(leaves, dim=-1)


def restore_original_dimensions(obs: Any, obs_space: gym.Space, tensorlib: Any = "torch") -> Any:
    """Cut a flat observation batch [B, N] back into `obs_space.original_space`'s structure.

    Without an `original_space` (no preprocessing changed the space), `obs` is returned as is.
    """
    original = getattr(obs_space, "original_space", None)
    if original is None or isinstance(obs, (dict, tuple, list)):
        return obs
    return _unpack(obs, original)


#: id(space) -> (space, layout): the layout of a flattened space, computed once per space
#: (the space is kept so that its id cannot be reused by another object).
_LAYOUTS: dict[int, tuple[gym.Space, Any]] = {}


def _layout(space: gym.Space) -> tuple[Any, int]:
    """(layout, flat size) of a space: ("leaf", shape) or (kind, [(key, sub-layout, offset, size)])
    with kind "dict" or "tuple", in the order the preprocessors flatten them."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        is_dict = isinstance(space, gym.spaces.Dict)
        children: list[tuple[str | int, gym.Space]] = \
            list(space.spaces.items()) if isinstance(space, gym.spaces.Dict) else list(enumerate(space.spaces))
        parts, offset = [], 0
        for k, child in children:
            sub, size = _layout(child)
            parts.append((k, sub, offset, size))
            offset += size
        return ("dict" if is_dict else "tuple", parts), offset
    shape = tuple(get_preprocessor(space)(space).shape)
    return ("leaf", shape), int(np.prod(shape))


def _cached_layout(space: gym.Space) -> tuple[Any, int]:
    hit = _LAYOUTS.get(id(space))
    if hit is None or hit[0] is not space:
        hit = (space, _layout(space))
        _LAYOUTS[id(space)] = hit
    return hit[1]


def _unpack(obs: Any, space: gym.Space) -> Any:
    layout, size = _cached_layout(space)
    if obs.shape[-1] != size and layout[0] != "leaf":
        raise ValueError(f"A flat observation of width {obs.shape[-1]} does not fit {space} "
                         f"(which flattens to {size} values).")
    return _apply_layout(obs, layout)


def _apply_layout(obs: Any, layout: Any) -> Any:
    kind, spec = layout
    if kind == "leaf":
        return obs.reshape(obs.shape[0], *spec)
    parts = [(k, _apply_layout(obs[:, off:off + size], sub)) for k, sub, off, size in spec]
    return dict(parts) if kind == "dict" else tuple(p for _, p in parts)
