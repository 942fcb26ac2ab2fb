"""Action masking for the default modules: Dict observations that carry a mask of the valid actions.

An env whose observation space is `Dict({"action_mask": Box(0, 1, (n,)), "observations": ...})`
(the mask under `action_mask_key`, default "action_mask") tells the module which actions are
allowed now. The default modules (PPO's actor-critic, DQN's Q-network, discrete SAC) read only
the other keys and set the logits (or Q-values) of masked actions to float32's lowest finite
value, FLOAT_MIN: softmax gives them probability 0, argmax never picks them, and log-probs,
entropies and KLs stay finite (-inf would turn 0 * log p into NaN).

The EnvRunner hands modules Dict observations flattened (each key's preprocessed value, in the
Dict's key order, as DictFlatteningPreprocessor writes them); `ActionMask.split` cuts that
vector into the model's input and the mask. MultiDiscrete actions take the per-component masks
concatenated (`sum(nvec)` entries), matching MultiCategorical's concatenated logits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.config_view import ResolvedConfig
from rlx.core.preprocessors import get_preprocessor
from rlx.utils.errors import ConfigError, NotSupportedYetError

#: The value masked logits and Q-values get (float32's lowest finite number).
FLOAT_MIN = float(torch.finfo(torch.float32).min)
DEFAULT_ACTION_MASK_KEY = "action_mask"


def mask_width(action_space: gym.Space) -> int:
    """Entries an action mask needs for `action_space`: n (Discrete) or sum(nvec) (MultiDiscrete)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    raise NotSupportedYetError(
        f"action masking with action space {action_space}",
        "masks select among discrete actions: Discrete and MultiDiscrete action spaces",
        fix="Remove the action mask from the observation Dict, or use a Discrete/MultiDiscrete action space.")


def apply_action_mask(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """`logits` with the entries where `mask` is 0 set to FLOAT_MIN (unchanged when mask is None)."""
    if mask is None:
        return logits
    return logits.masked_fill(mask < 0.5, FLOAT_MIN)


@dataclass
class ActionMask:
    """Where the mask and the model input sit in a flattened Dict observation.

    `input_space` is the space the module's networks are built on: the one other key's
    preprocessed space (images keep their shape), or a flat Box of all other keys concatenated.
    """

    key: str
    mask_slice: slice
    input_slices: list[slice]
    input_keys: list[str]
    input_space: gym.spaces.Box
    width: int

    def split(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(model input [..., *input_space.shape], mask [..., width]) of flat observations [..., N]
        (or of a dict of tensors/arrays keyed like the observation space)."""
        if isinstance(obs, dict):
            return self._split_dict(obs)
        lead = obs.shape[:-1]
        mask = obs[..., self.mask_slice]
        if len(self.input_slices) == 1:
            inner = obs[..., self.input_slices[0]]
        else:
            inner = torch.cat([obs[..., s] for s in self.input_slices], dim=-1)
        return inner.reshape(*lead, *self.input_space.shape), mask

    def _split_dict(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        mask = torch.as_tensor(obs[self.key], dtype=torch.float32)
        if mask.shape[-1] != self.width:
            raise ValueError(f"The observation's {self.key!r} has {mask.shape[-1]} entries per row; the action "
                             f"space needs {self.width} (one per action).")
        lead = mask.shape[:-1]
        parts = [torch.as_tensor(obs[k], dtype=torch.float32).reshape(*lead, -1) for k in self.input_keys]
        inner = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return inner.reshape(*lead, *self.input_space.shape), mask


def find_action_mask(observation_space: gym.Space, action_space: gym.Space,
                     model_config: dict[str, Any] | None = None) -> ActionMask | None:
    """The ActionMask of a module's (preprocessed) observation space, or None when the env's
    observation space is not a Dict holding the mask key (`model_config["action_mask_key"]`,
    default "action_mask"). Raises ConfigError when the mask's size does not fit the actions."""
    model_config = model_config or {}
    key = model_config.get("action_mask_key") or DEFAULT_ACTION_MASK_KEY
    original = getattr(observation_space, "original_space", observation_space)
    if not isinstance(original, gym.spaces.Dict) or key not in original.spaces:
        return None
    if len(original.spaces) < 2:
        raise ConfigError(f"The observation Dict holds only the action mask {key!r}: add the real observation "
                          "under another key (e.g. 'observations').")
    width = mask_width(action_space)
    mask_space = original.spaces[key]
    mask_shape = tuple(getattr(mask_space, "shape", None) or ())
    if not isinstance(mask_space, (gym.spaces.Box, gym.spaces.MultiBinary)) or int(np.prod(mask_shape)) != width:
        raise ConfigError(
            f"The action mask {key!r} of the observation space is {mask_space}, but action space {action_space} "
            f"needs a mask of shape ({width},): one 0/1 entry per action"
            + (" (the per-component masks concatenated)." if width != getattr(action_space, "n", width) else "."))
    slices: dict[str, slice] = {}
    preprocessed: dict[str, gym.spaces.Box] = {}
    start = 0
    for k, space in original.spaces.items():
        prep = get_preprocessor(space)(space, model_config)
        slices[k] = slice(start, start + prep.size)
        preprocessed[k] = prep.observation_space
        start += prep.size
    others = [k for k in original.spaces if k != key]
    if len(others) == 1:
        input_space = preprocessed[others[0]]
    else:
        size = sum(slices[k].stop - slices[k].start for k in others)
        input_space = gym.spaces.Box(-np.inf, np.inf, (size,), dtype=np.float32)
    return ActionMask(key=key, mask_slice=slices[key], input_slices=[slices[k] for k in others], input_keys=others,
                      input_space=input_space, width=width)


def random_valid_actions(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random action per row of `logits` [B, n] among the entries above FLOAT_MIN
    (all entries where none is): keys in [1, 2) for valid actions and [0, 1) for masked ones,
    so the argmax is uniform over the valid ones (one vectorized draw, no per-row loop)."""
    return (rng.random(logits.shape) + (logits > FLOAT_MIN)).argmax(-1)



def with_action_mask_key(spec: Any, config: ResolvedConfig, multi_agent: bool = False) -> Any:
    """`spec` (an RLModuleSpec) whose model_config carries the config's non-default
    `action_mask_key` (config.environment(action_mask_key=...)), so the default modules find
    the mask under it; `spec` unchanged for the default key."""
    key = getattr(config, "action_mask_key", DEFAULT_ACTION_MASK_KEY)
    if key == DEFAULT_ACTION_MASK_KEY or not hasattr(spec, "model_config"):
        return spec
    if multi_agent:
        raise NotSupportedYetError(
            f"action_mask_key={key!r} in multi-agent runs", "multi-agent modules find masks under 'action_mask'",
            fix="Name the mask 'action_mask' in the observation Dicts, or leave action_mask_key at its default.")
    from dataclasses import replace

    model = spec.model_config if spec.model_config is not None else config.model
    return replace(spec, model_config={**model, "action_mask_key": key})
