"""TorchModelV2: the ModelV2 base of PyTorch custom models (RLlib's `ray.rllib.models.torch.torch_modelv2`).

RLlib's path, `rlx.models.torch.torch_modelv2`, is an alias of this module's names.

A custom model subclasses both this and `torch.nn.Module`, and calls both constructors:

    class MyModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kw):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            ...
        def forward(self, input_dict, state, seq_lens):
            return logits, state
        def value_function(self):
            return values  # [B]
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.core.modelv2 import ModelV2
from rlx.utils.model_summary import summarize

__all__ = ["TorchModelV2"]


class TorchModelV2(ModelV2):
    """ModelV2 for PyTorch; subclasses also inherit `torch.nn.Module`."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None,
                 model_config: dict, name: str):
        ModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name, framework="torch")

    def variables(self, as_dict: bool = False) -> Any:
        """The parameters and buffers (`state_dict()`), as a dict or a list."""
        state = self.state_dict()  # type: ignore[attr-defined]
        return dict(state) if as_dict else list(state.values())

    def trainable_variables(self, as_dict: bool = False) -> Any:
        """The parameters that require gradients."""
        named = {k: v for k, v in self.named_parameters() if v.requires_grad}  # type: ignore[attr-defined]
        return named if as_dict else list(named.values())

    def summary(self, print_fn: Any = print) -> str:
        """Print (with `print_fn`; None: do not print) and return a Keras-style table of the
        model's layers: output shapes for one observation, parameter counts and totals."""
        import numpy as np
        import torch

        def run_example() -> Any:
            obs = np.asarray(self.obs_space.sample(), dtype=np.float32)[None]
            state = [torch.as_tensor(np.asarray(s))[None] for s in self.get_initial_state()]
            out = self({"obs": torch.as_tensor(obs)}, state, torch.ones(1, dtype=torch.int32))  # type: ignore[operator]
            try:
                self.value_function()  # value branches of separate-vf models run here
            except Exception:  # noqa: BLE001 - models without a value head
                pass
            return out

        text = str(summarize(self, run_example, title=self.name))  # type: ignore[arg-type]
        if print_fn is not None:
            print_fn(text)
        return text

