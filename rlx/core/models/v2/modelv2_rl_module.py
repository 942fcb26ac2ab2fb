"""ModelV2RLModule: runs an old-API ModelV2 (a `custom_model`) as an RLModule.

The model is built with `ModelCatalog.get_model_v2` (`build_model_v2`) from the module's observation space
(the preprocessed flat Box, whose `original_space` the model's `input_dict["obs"]` is
restored to), the action space, the width of the action distribution's inputs
(`num_outputs`) and the model config. Every forward pass calls the model on
`{"obs": flat_obs}`; `action_dist_inputs` are its outputs, `vf_preds` its
`value_function()`. A recurrent model (non-empty `get_initial_state()`, e.g. a
`RecurrentNetwork` or `use_lstm=True`) gets [B, T] sequences flattened to [B * T] rows,
its state list and `seq_lens`, as on RLlib's old stack; its state travels through the
EnvRunner and the Learner as `state_in_0`, `state_in_1`, ...

Masking works as in RLlib: a model that adds `log(mask)` clamped to `FLOAT_MIN` (the
float32 minimum) to its logits gives masked actions a probability of exactly 0, so they
are never sampled and add nothing to the loss. Use `FLOAT_MIN` rather than `-inf`:
`-inf` logits make the KL and entropy terms NaN (0 * inf).

The algorithm base builds this module for configs that name a `custom_model`, so it lives in the
core; `rlx.models.modelv2_rl_module` (RLlib's old-API side) is an alias of it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.distributions import dist_class_for_space
from rlx.core.models.v2.model_builder import build_model_v2
from rlx.core.rl_module.rl_module import RLModule
from rlx.core.rl_module.apis import ValueFunctionAPI
from rlx.utils.errors import ConfigError

__all__ = ["ModelV2RLModule"]


class ModelV2RLModule(RLModule, ValueFunctionAPI):
    """An RLModule whose network is the config's `custom_model` (a TorchModelV2)."""

    #: The user's ModelV2 (a torch.nn.Module of any class).
    model: Any

    def setup(self) -> None:
        cfg = self.model_config
        if not cfg.get("custom_model"):
            raise ConfigError("ModelV2RLModule runs the model of model['custom_model'], which is not set.")
        obs_space, action_space = self.observation_space, self.action_space
        if obs_space is None or action_space is None:
            raise ConfigError("ModelV2RLModule needs its observation_space and action_space to build "
                              "model['custom_model']; give both to its RLModuleSpec.")
        dist_cls, _ = dist_class_for_space(action_space, cfg)
        num_outputs = int(dist_cls.required_input_dim(action_space, cfg))
        model = build_model_v2(obs_space, action_space, num_outputs, cfg, framework="torch", name="model")
        if not isinstance(model, nn.Module):
            raise ConfigError(
                f"custom_model {type(model).__name__} must be a torch.nn.Module: subclass TorchModelV2 and "
                "nn.Module (class MyModel(TorchModelV2, nn.Module)) and call both constructors."
            )
        self.model = model
        # A recurrent model's state list [s0, s1, ...] travels as {"state_in_0": s0, ...}.
        self._state_keys = [f"state_in_{i}" for i in range(len(self.model.get_initial_state()))]

    def old_api_model(self) -> Any:
        """The user's ModelV2 object itself: what `policy.model` is on RLlib's old stack."""
        return self.model

    def get_initial_state(self) -> dict[str, Any]:
        """The model's initial state (empty for a feed-forward model), as NumPy arrays by name."""
        initial = self.model.get_initial_state()
        return {key: np.asarray(s.detach().cpu() if isinstance(s, torch.Tensor) else s, np.float32)
                for key, s in zip(self._state_keys, initial)}

    def _run(self, batch: dict[str, Any], training: bool) -> tuple[torch.Tensor, dict[str, Any]]:
        """(action-distribution inputs, state_out); recurrent models see [B, T, ...] batches,
        flattened to [B * T, ...] with `seq_lens` as RLlib's old stack hands them over."""
        obs = batch[Columns.OBS]
        if not self._state_keys:
            logits, _ = self.model({"obs": obs, "is_training": training}, [], None)
            return logits, {}
        B, T = obs.shape[:2]
        state_in = batch[Columns.STATE_IN]
        state = [torch.as_tensor(state_in[key]) for key in self._state_keys]
        seq_lens = torch.full((B,), T, dtype=torch.int32)
        logits, new_state = self.model({"obs": obs.reshape(B * T, *obs.shape[2:]), "is_training": training},
                                       state, seq_lens)
        if len(new_state) != len(self._state_keys):
            raise ValueError(f"{type(self.model).__name__} returned {len(new_state)} state tensors; its "
                             f"get_initial_state() has {len(self._state_keys)}.")
        return logits.reshape(B, T, -1), dict(zip(self._state_keys, new_state))

    def _values(self, batch: dict[str, Any]) -> torch.Tensor:
        values = self.model.value_function()
        return values.reshape(batch[Columns.OBS].shape[:2]) if self._state_keys else values.reshape(-1)

    def _forward(self, batch: dict[str, Any], training: bool = False, **kwargs: Any) -> dict[str, Any]:
        logits, state_out = self._run(batch, training=training)
        out: dict[str, Any] = {Columns.ACTION_DIST_INPUTS: logits}
        if state_out:
            out[Columns.STATE_OUT] = state_out
        return out

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, training=False)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, training=False)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        out = self._forward(batch, training=True)
        if not self.inference_only:
            out[Columns.VF_PREDS] = self._values(batch)
        return out

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values V(obs) from the model's value_function(): [B], or [B, T] for recurrent models."""
        self._run(batch, training=False)
        return self._values(batch)
