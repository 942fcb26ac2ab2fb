"""ModelView: the old API's `policy.model` over an RLModule.

Callable like a ModelV2 (`logits, state = model({"obs": batch})`, then `value_function()`), with
the torch-module surface old-API code reads (`parameters()`, `variables()`, `state_dict()`,
`base_model`). It owns no weights: it runs the module it was given. Algorithms whose module has
another old-API model surface subclass it (DQN's Q-model view).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch

from rlx.core.columns import Columns

__all__ = ["ModelView"]


class ModelView:
    """Callable like an old ModelV2: `logits, state = model({"obs": batch})`, then `value_function()`."""

    def __init__(self, module: Any):
        self.module = module
        self._last_values: torch.Tensor | None = None

    def __call__(self, input_dict: dict[str, Any], state: list | None = None,
                 seq_lens: Any = None) -> tuple[torch.Tensor, list]:
        obs = input_dict["obs"] if isinstance(input_dict, dict) else input_dict
        obs_t = obs if isinstance(obs, torch.Tensor) else torch.as_tensor(np.asarray(obs, dtype=np.float32))
        if obs_t.dtype != torch.float32:
            obs_t = obs_t.float()
        batch = {Columns.OBS: obs_t}
        if getattr(self.module, "has_value_function", False) and getattr(self.module, "vf", True) is not None:
            out = self.module.forward_train(batch)
            self._last_values = out.get(Columns.VF_PREDS)
        else:
            out = self.module.forward_inference(batch)
            self._last_values = None
        return out[Columns.ACTION_DIST_INPUTS], []

    def from_batch(self, train_batch: dict[str, Any], is_training: bool = True) -> tuple[torch.Tensor, list]:
        """`model(train_batch)`: the forward pass on the batch's `"obs"`."""
        return self(train_batch)

    def value_function(self) -> torch.Tensor:
        """Values of the observations of the most recent forward pass, shape [B]."""
        if self._last_values is None:
            raise ValueError("value_function() needs a forward pass first (and a module with a value head).")
        return self._last_values

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        """The module's parameters, an iterator as `torch.nn.Module.parameters()` gives them."""
        return self.module.parameters(recurse)

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """(name, parameter) pairs of the module, as `torch.nn.Module.named_parameters()` gives them."""
        return self.module.named_parameters(prefix, recurse)

    def variables(self, as_dict: bool = False) -> Any:
        """The module's parameters and buffers (its `state_dict()`), as a list or a name -> tensor dict."""
        state = self.module.state_dict()
        return dict(state) if as_dict else list(state.values())

    def trainable_variables(self, as_dict: bool = False) -> Any:
        """The module's parameters that require gradients, as a list or a name -> tensor dict."""
        named = {k: v for k, v in self.module.named_parameters() if v.requires_grad}
        return named if as_dict else list(named.values())

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The module's state_dict."""
        return self.module.state_dict()

    @property
    def base_model(self) -> Any:
        """The underlying torch module."""
        return self.module

    def __repr__(self) -> str:
        return f"ModelView({self.module!r})"
