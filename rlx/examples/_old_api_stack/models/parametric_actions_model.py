"""Models for parametric (variable, embedded) action spaces with action masking.

RLlib's `ray.rllib.examples._old_api_stack.models.parametric_actions_model`, for envs such
as `rlx.examples.envs.classes.parametric_actions_cartpole.ParametricActionsCartPole`,
whose observation is a dict with

- "cart": the real observation,
- "avail_actions": one embedding per action slot [n, embed_size] (ParametricActionsCartPole),
- "action_mask": 1 for the slots that are valid now, 0 for the others [n],
- "valid_avail_actions_mask": the mask of ParametricActionsCartPoleNoEmbeddings.

The model embeds "cart" into an intent vector, scores each action as the dot product of
its embedding with that vector, and adds `log(mask)` clamped to FLOAT_MIN, so masked
actions get a probability of exactly 0:

    ModelCatalog.register_custom_model("pa_model", TorchParametricActionsModel)
    config = PPOConfig().environment(ParametricActionsCartPole, env_config={"max_avail_actions": 10})
    config.training(model={"custom_model": "pa_model"})

rlx is PyTorch-only: `ParametricActionsModel` and
`ParametricActionsModelThatLearnsEmbeddings` (RLlib's TensorFlow versions) say so when built.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from torch import nn

from rlx.models.torch.fcnet import FullyConnectedNetwork as TorchFC
from rlx.models.torch.torch_modelv2 import TorchModelV2
from rlx.utils.errors import ConfigError
from rlx.utils.torch_utils import FLOAT_MAX, FLOAT_MIN

__all__ = [
    "ParametricActionsModel",
    "ParametricActionsModelThatLearnsEmbeddings",
    "TorchParametricActionsModel",
    "TorchParametricActionsModelThatLearnsEmbeddings",
    "mask_logits",
]


def mask_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`logits` with `log(mask)` (clamped to the float32 range) added: masked entries
    become FLOAT_MIN (probability 0 after softmax), the others are unchanged."""
    return logits + torch.clamp(torch.log(mask.float()), FLOAT_MIN, FLOAT_MAX)


def _original(obs_space: gym.Space) -> gym.Space:
    return getattr(obs_space, "original_space", obs_space)


class TorchParametricActionsModel(TorchModelV2, nn.Module):
    """Scores each available action's embedding against an intent vector computed from "cart".

    Args (beyond ModelV2's, set through `model={"custom_model_config": {...}}`):
        true_obs_shape: shape of the "cart" observation (default: read from the obs space).
        action_embed_size: width of the action embeddings (default: read from "avail_actions").
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, true_obs_shape: tuple | None = None, action_embed_size: int | None = None, **kw: Any):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        original = _original(obs_space)
        spaces = getattr(original, "spaces", {})
        if true_obs_shape is None:
            true_obs_shape = tuple(spaces["cart"].shape) if "cart" in spaces else (4,)
        if action_embed_size is None:
            action_embed_size = int(spaces["avail_actions"].shape[-1]) if "avail_actions" in spaces else 2
        self.action_embed_model = TorchFC(
            gym.spaces.Box(-1, 1, shape=tuple(true_obs_shape)), action_space, int(action_embed_size),
            model_config, name + "_action_embed",
        )

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        obs = input_dict["obs"]
        avail_actions = obs["avail_actions"]  # [B, n, embed]
        action_mask = obs["action_mask"]  # [B, n]
        action_embed, _ = self.action_embed_model({"obs": obs["cart"]})  # [B, embed]
        # Batch dot product of every action embedding with the intent vector: [B, n].
        action_logits = torch.sum(avail_actions * action_embed.unsqueeze(1), dim=2)
        return mask_logits(action_logits, action_mask), state

    def value_function(self) -> torch.Tensor:
        return self.action_embed_model.value_function()


class TorchParametricActionsModelThatLearnsEmbeddings(TorchModelV2, nn.Module):
    """Like TorchParametricActionsModel, but learns the action embeddings itself: the
    observation holds only "cart" and "valid_avail_actions_mask" (an action slot's
    embedding is a learned vector; slot 0 of the table is a dummy for masked slots)."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int, model_config: dict,
                 name: str, true_obs_shape: tuple | None = None, action_embed_size: int = 2, **kw: Any):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        spaces = getattr(_original(obs_space), "spaces", {})
        if true_obs_shape is None:
            true_obs_shape = tuple(spaces["cart"].shape) if "cart" in spaces else (4,)
        self.register_buffer("action_ids_shifted", torch.arange(1, num_outputs + 1, dtype=torch.long),
                             persistent=False)
        self.pred_action_embed_model = TorchFC(
            gym.spaces.Box(-1, 1, shape=tuple(true_obs_shape)), action_space, int(action_embed_size),
            model_config, name + "_pred_action_embed",
        )
        self.action_embedding = nn.Embedding(num_outputs + 1, int(action_embed_size))

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[torch.Tensor, list]:
        obs = input_dict["obs"]
        mask = obs["valid_avail_actions_mask"]  # [B, n]
        intent, _ = self.pred_action_embed_model({"obs": obs["cart"]})  # [B, embed]
        ids = self.action_ids_shifted.unsqueeze(0) * (mask > 0).long()  # 0 for masked slots
        embeds = self.action_embedding(ids)  # [B, n, embed]
        action_logits = torch.sum(embeds * intent.unsqueeze(1), dim=2)
        return mask_logits(action_logits, mask), state

    def value_function(self) -> torch.Tensor:
        return self.pred_action_embed_model.value_function()


class _TensorFlowOnly:
    """RLlib's TensorFlow model of the same name; rlx is PyTorch-only."""

    torch_version: type = TorchParametricActionsModel

    def __init__(self, *args: Any, **kwargs: Any):
        raise ConfigError(
            f"{type(self).__name__} is RLlib's TensorFlow model and rlx is PyTorch-only: use "
            f"{self.torch_version.__name__} (framework='torch')."
        )


class ParametricActionsModel(_TensorFlowOnly):
    """RLlib's TensorFlow version of TorchParametricActionsModel (not available in rlx)."""

    torch_version = TorchParametricActionsModel


class ParametricActionsModelThatLearnsEmbeddings(_TensorFlowOnly):
    """RLlib's TensorFlow version of TorchParametricActionsModelThatLearnsEmbeddings (not available in rlx)."""

    torch_version = TorchParametricActionsModelThatLearnsEmbeddings
