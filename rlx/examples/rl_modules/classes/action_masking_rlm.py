"""ActionMaskingTorchRLModule: PPO's default module with invalid actions masked out.

The env's observations are Dict({"action_mask": Box(0, 1, (n,)), "observations": ...}); the
networks read "observations", and actions whose mask entry is 0 get logits of FLOAT_MIN, so they
are never sampled (nor chosen greedily). rlx's EnvRunner hands modules Dict observations
flattened (each part in the Dict's key order); this module splits them again, and accepts the
dict form too.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from rlx.core.columns import Columns
from rlx.core.models import ActorCriticModule
from rlx.core.preprocessors import get_preprocessor
from rlx.utils.torch_utils import FLOAT_MIN


def _dict_space(space: gym.Space) -> gym.spaces.Dict:
    full = getattr(space, "original_space", space)
    if not isinstance(full, gym.spaces.Dict) or set(full.spaces) != {"action_mask", "observations"}:
        raise ValueError("ActionMaskingTorchRLModule needs the env's observation space to be "
                         "Dict({'action_mask': Box(0.0, 1.0, (n,)), 'observations': <space>}); got "
                         f"{full}.")
    return full


class ActionMaskingTorchRLModule(ActorCriticModule):
    """rlx's PPO actor-critic on the "observations" part, with logits masked by "action_mask"."""

    def __init__(self, *, observation_space: gym.Space | None = None, action_space: gym.Space | None = None,
                 **kwargs: Any):
        self.observation_space_with_mask = _dict_space(observation_space)
        # The flat layout rlx's Dict preprocessor produces: each part flattened, in key order.
        self._slices: dict[str, slice] = {}
        start = 0
        for key, space in self.observation_space_with_mask.spaces.items():
            size = get_preprocessor(space)(space, {}).size
            self._slices[key] = slice(start, start + size)
            start += size
        inner = self.observation_space_with_mask["observations"]
        inner_flat = get_preprocessor(inner)(inner, {}).observation_space
        super().__init__(observation_space=inner_flat, action_space=action_space, **kwargs)

    def _split(self, batch: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor]:
        obs = batch[Columns.OBS]
        if isinstance(obs, dict):
            mask, inner = obs["action_mask"], obs["observations"]
        else:
            obs = torch.as_tensor(obs)
            flat = obs.reshape(obs.shape[0], -1)
            mask, inner = flat[:, self._slices["action_mask"]], flat[:, self._slices["observations"]]
        inner = torch.as_tensor(inner, dtype=torch.float32)
        return {**batch, Columns.OBS: inner}, torch.as_tensor(mask, dtype=torch.float32)

    @staticmethod
    def _masked(out: dict[str, Any], mask: torch.Tensor) -> dict[str, Any]:
        logits = out[Columns.ACTION_DIST_INPUTS]
        out[Columns.ACTION_DIST_INPUTS] = logits + torch.clamp(torch.log(mask), min=FLOAT_MIN)
        return out

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        inner, mask = self._split(batch)
        return self._masked(super().forward_inference(inner, **kwargs), mask)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        inner, mask = self._split(batch)
        return self._masked(super().forward_train(inner, **kwargs), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        inner, _ = self._split(batch)
        return super().compute_values(inner)


#: RLlib's framework-agnostic base name.
ActionMaskingRLModule = ActionMaskingTorchRLModule

__all__ = ["ActionMaskingRLModule", "ActionMaskingTorchRLModule"]
