"""Old-API action distributions (RLlib's `ray.rllib.models.torch.torch_action_dist`).

`TorchDistributionWrapper` is the base class of custom action distributions: subclass it, give
`required_model_output_shape(action_space, model_config)` and the methods (`sample`,
`deterministic_sample`, `logp`, `entropy`, `kl`), register it with
`ModelCatalog.register_custom_action_dist(name, cls)` and name it in
`model={"custom_action_dist": name}`. rlx's built-in distributions answer to RLlib's old names.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import Categorical, DiagGaussian, Distribution, MultiCategorical

__all__ = ["TorchDistributionWrapper", "TorchCategorical", "TorchMultiCategorical", "TorchDiagGaussian"]


class _OldApiSampling:
    """Lets subclasses write RLlib's old `sample()` (no arguments): rlx passes its seeded generator
    only to samplers that accept one, and remembers each sample (for `sampled_action_logp()` and
    RLlib's `last_sample`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        sample = cls.__dict__.get("sample")
        if sample is not None and "generator" not in inspect.signature(sample).parameters:
            @functools.wraps(sample)
            def sample_with_generator(self: Any, generator: Any = None) -> torch.Tensor:
                out = sample(self)
                self._last_sample = self.last_sample = out
                return out

            cls.sample = sample_with_generator  # type: ignore[method-assign]
        deterministic = cls.__dict__.get("deterministic_sample")
        if deterministic is not None:
            @functools.wraps(deterministic)
            def remembered_deterministic(self: Any) -> torch.Tensor:
                out = deterministic(self)
                self._last_sample = self.last_sample = out
                return out

            cls.deterministic_sample = remembered_deterministic  # type: ignore[method-assign]


class TorchDistributionWrapper(_OldApiSampling, Distribution):
    """Base class of old-API (custom) action distributions: `inputs` are the model's outputs.

    Subclasses' `sample()` may take no arguments (RLlib's signature): rlx passes its seeded
    generator only to samplers that accept one, and remembers each sample for
    `sampled_action_logp()`.
    """

    def __init__(self, inputs: Any, model: Any = None):
        super().__init__(inputs, model)
        self.model = model
        self.last_sample: torch.Tensor | None = None

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> Any:
        """How many model outputs (an int or a shape) the distribution reads for `action_space`."""
        raise TypeError("TorchDistributionWrapper subclasses define required_model_output_shape(action_space, "
                        "model_config)")

    @classmethod
    def required_input_dim(cls, space: gym.Space, model_config: dict | None = None) -> int:  # type: ignore[override]
        """The flat size of `required_model_output_shape`."""
        return int(np.prod(cls.required_model_output_shape(space, model_config or {})))

    def kl(self, other: Distribution) -> torch.Tensor:
        """KL(self || other); custom distributions without one cannot use PPO's KL term."""
        raise TypeError(f"{type(self).__name__} defines no kl(other): set training(use_kl_loss=False) or add kl().")


class TorchCategorical(_OldApiSampling, Categorical):
    """Categorical over Discrete actions (the old API's name for rlx's Categorical); subclasses may
    override `sample()` with RLlib's signature."""

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        """`action_space.n` logits."""
        return int(action_space.n)


class TorchMultiCategorical(_OldApiSampling, MultiCategorical):
    """Independent categoricals over MultiDiscrete actions (old-API name)."""

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        """The sum of the sub-spaces' sizes."""
        return int(np.sum(action_space.nvec))


class TorchDiagGaussian(_OldApiSampling, DiagGaussian):
    """Diagonal Gaussian over Box actions (old-API name): means and log-stds."""

    @staticmethod
    def required_model_output_shape(action_space: gym.Space, model_config: dict) -> int:
        """Twice the number of action components."""
        return 2 * int(np.prod(action_space.shape))
