"""RLModule: the torch.nn.Module that maps observations to action-distribution inputs.

Subclasses build their layers in `setup()` and implement `forward_train` (and, when
inference differs, `forward_inference` / `forward_exploration`). Every forward method
takes a dict batch keyed by `Columns` names and returns a dict.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.distributions import BoundDistribution, dist_class_for_space
from rlx.utils.errors import ConfigError


class RLModule(nn.Module):
    """Base class of rlx's neural-network modules.

    Args:
        observation_space: the (preprocessed) observation space the module reads.
        action_space: the env's action space.
        model_config: model settings (see rlx.models.MODEL_DEFAULTS).
        inference_only: build only what inference needs (e.g. no value head).
    """

    def __init__(
        self,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        model_config: dict | None = None,
        inference_only: bool = False,
    ):
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = dict(model_config or {})
        self.inference_only = inference_only
        self.setup()

    def setup(self) -> None:
        """Create the layers (override in subclasses)."""

    # -------------------------------------------------------------- forward passes

    # A module implements either the public methods (rlx's own modules) or, as RLlib's new API
    # stack documents, `_forward` and optionally `_forward_train` / `_forward_inference` /
    # `_forward_exploration`. When sampling, a module may return `actions` itself (and then
    # `action_logp`) instead of `action_dist_inputs`.

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Forward pass for the loss; must return at least `action_dist_inputs`."""
        return self._forward_train(batch, **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Forward pass while sampling with exploration (defaults to forward_inference)."""
        return self._forward_exploration(batch, **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Forward pass for acting without exploration (defaults to forward_train)."""
        return self._forward_inference(batch, **kwargs)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The forward pass every mode uses unless it has its own (RLlib's new-API hook)."""
        if type(self).forward_train is not RLModule.forward_train:
            return self.forward_train(batch, **kwargs)
        raise TypeError(f"{type(self).__name__} must implement _forward(batch) (or forward_train(batch)).")

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, **kwargs)

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, **kwargs)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if type(self).forward_inference is not RLModule.forward_inference:
            return self.forward_inference(batch, **kwargs)
        if type(self)._forward_inference is not RLModule._forward_inference:
            return self._forward_inference(batch, **kwargs)
        return self._forward(batch, **kwargs)

    def forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # noqa: D102
        return self.forward_train(batch, **kwargs)

    # -------------------------------------------------------------- recurrent modules

    def get_initial_state(self) -> dict[str, Any]:
        """The state a recurrent module starts each episode with ({name: array without a batch
        axis}); {} for stateless modules."""
        return {}

    def is_stateful(self) -> bool:
        """Whether the module is recurrent: it then reads `state_in` and returns `state_out`, and
        its batches carry a time axis (`obs` shaped [B, T, ...])."""
        return bool(self.get_initial_state())

    # -------------------------------------------------------------- distributions

    def get_train_action_dist_cls(self) -> BoundDistribution:
        """Distribution class built from forward_train's `action_dist_inputs`."""
        cls, kwargs = dist_class_for_space(self.action_space, self.model_config)
        return BoundDistribution(cls, **kwargs)

    def get_exploration_action_dist_cls(self) -> BoundDistribution:
        """Distribution class used while sampling with exploration."""
        return self.get_train_action_dist_cls()

    def get_inference_action_dist_cls(self) -> BoundDistribution:
        """Distribution class used for deterministic inference."""
        return self.get_train_action_dist_cls()

    # -------------------------------------------------------------- state

    def get_state(self) -> dict[str, np.ndarray]:
        """Weights as a flat dict of NumPy arrays."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.state_dict().items()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Load weights from a flat dict of arrays or tensors (shapes must match)."""
        own = self.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(
                f"Weights do not match {type(self).__name__}: missing {missing or 'none'}, "
                f"unexpected {unexpected or 'none'}."
            )
        tensors = {}
        for k, v in state.items():
            t = torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v
            if tuple(t.shape) != tuple(own[k].shape):
                raise ValueError(f"Weight '{k}' has shape {tuple(t.shape)}, the module expects {tuple(own[k].shape)}.")
            tensors[k] = t
        with torch.no_grad():
            self.load_state_dict(tensors)

    @property
    def has_value_function(self) -> bool:
        """Whether `compute_values` is available."""
        return hasattr(self, "compute_values")

    def summary(self, print_fn: Any = print) -> str:
        """Print (with `print_fn`; None: do not print) and return a Keras-style table of the
        module's layers: output shapes for one observation, parameter counts and totals."""
        from rlx.utils.model_summary import summarize

        text = str(summarize(self, self._example_forward, title=type(self).__name__))
        if print_fn is not None:
            print_fn(text)
        return text

    def _example_forward(self) -> Any:
        """forward_train on one sampled observation (one time step for recurrent modules)."""
        obs = np.asarray(self.observation_space.sample())
        obs_t = torch.as_tensor(obs[None] if obs.dtype == np.uint8 else obs[None].astype(np.float32))
        device = next((p.device for p in self.parameters()), torch.device("cpu"))
        batch: dict[str, Any] = {Columns.OBS: obs_t.to(device)}
        initial = self.get_initial_state()
        if initial:
            batch[Columns.OBS] = batch[Columns.OBS][:, None]
            batch[Columns.STATE_IN] = {k: torch.as_tensor(np.asarray(v))[None].to(device) for k, v in initial.items()}
        return self.forward_train(batch)

    def output_specs_inference(self) -> list[str]:
        """Keys forward_inference returns."""
        return [Columns.ACTION_DIST_INPUTS]


@dataclasses.dataclass
class RLModuleSpec:
    """Recipe for an RLModule: its class, spaces and model config.

    Spaces left as None are filled in from the environment when the Algorithm builds.
    """

    module_class: type[RLModule] | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    model_config: dict | None = None
    inference_only: bool = False

    def build(self) -> RLModule:
        """Instantiate the module."""
        if self.module_class is None:
            raise ConfigError("RLModuleSpec.module_class is not set.")
        if self.observation_space is None or self.action_space is None:
            raise ConfigError("RLModuleSpec needs observation_space and action_space to build a module.")
        if not (isinstance(self.module_class, type) and issubclass(self.module_class, RLModule)):
            raise ConfigError(
                f"RLModuleSpec.module_class must be a subclass of rlx.core.rl_module.RLModule, got {self.module_class!r}."
            )
        return self.module_class(
            observation_space=self.observation_space,
            action_space=self.action_space,
            model_config=self.model_config,
            inference_only=self.inference_only,
        )

    @classmethod
    def from_module(cls, module: RLModule) -> "RLModuleSpec":
        """The spec that builds a module like `module` (its class, spaces and model config)."""
        return cls(module_class=type(module), observation_space=module.observation_space,
                   action_space=module.action_space, model_config=getattr(module, "model_config", None),
                   inference_only=bool(getattr(module, "inference_only", False)))

    # Older name used by RLlib's docs.
    @property
    def model_config_dict(self) -> dict | None:
        """Old name of model_config."""
        return self.model_config


SingleAgentRLModuleSpec = RLModuleSpec
