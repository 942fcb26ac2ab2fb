"""ModelV2RLModule: runs an old-API ModelV2 (a `custom_model`) as an RLModule.

The model is built with `ModelCatalog.get_model_v2` from the module's observation space
(the preprocessed flat Box, whose `original_space` the model's `input_dict["obs"]` is
restored to), the action space, the width of the action distribution's inputs
(`num_outputs`) and the model config. Every forward pass calls the model on
`{"obs": flat_obs}`; `action_dist_inputs` are its outputs, `vf_preds` its
`value_function()`.

Masking works as in RLlib: a model that adds `log(mask)` clamped to `FLOAT_MIN` (the
float32 minimum) to its logits gives masked actions a probability of exactly 0, so they
are never sampled and add nothing to the loss. Use `FLOAT_MIN` rather than `-inf`:
`-inf` logits make the KL and entropy terms NaN (0 * inf).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.distributions import dist_class_for_space
from rlx.core.rl_module import RLModule
from rlx.core.rl_module.apis import ValueFunctionAPI
from rlx.utils.errors import ConfigError, NotSupportedYetError

__all__ = ["ModelV2RLModule"]


class ModelV2RLModule(RLModule, ValueFunctionAPI):
    """An RLModule whose network is the config's `custom_model` (a TorchModelV2)."""

    def setup(self) -> None:
        from rlx.models.catalog import ModelCatalog

        cfg = self.model_config
        if not cfg.get("custom_model"):
            raise ConfigError("ModelV2RLModule runs the model of model['custom_model'], which is not set.")
        dist_cls, _ = dist_class_for_space(self.action_space, cfg)
        num_outputs = int(dist_cls.required_input_dim(self.action_space, cfg))
        model = ModelCatalog.get_model_v2(self.observation_space, self.action_space, num_outputs, cfg,
                                          framework="torch", name="model")
        if not isinstance(model, nn.Module):
            raise ConfigError(
                f"custom_model {type(model).__name__} must be a torch.nn.Module: subclass TorchModelV2 and "
                "nn.Module (class MyModel(TorchModelV2, nn.Module)) and call both constructors."
            )
        if model.get_initial_state():
            raise NotSupportedYetError(f"recurrent custom_model {type(model).__name__}",
                                       "ModelV2s with a recurrent state (get_initial_state() not empty)",
                                       fix="Use a feed-forward model.")
        self.model = model

    def _run(self, batch: dict[str, Any], training: bool) -> torch.Tensor:
        obs = batch[Columns.OBS]
        logits, _ = self.model({"obs": obs, "is_training": training}, [], None)
        return logits

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._run(batch, training=False)}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._run(batch, training=False)}

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logits = self._run(batch, training=True)
        out = {Columns.ACTION_DIST_INPUTS: logits}
        if not self.inference_only:
            out[Columns.VF_PREDS] = self.model.value_function().reshape(-1)
        return out

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values V(obs), shape [B], from the model's value_function()."""
        self._run(batch, training=False)
        return self.model.value_function().reshape(-1)
