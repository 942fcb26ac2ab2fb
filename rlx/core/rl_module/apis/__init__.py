"""The RLModule API mix-ins of RLlib's new stack (`ray.rllib.core.rl_module.apis`).

A module declares what it offers by subclassing them: `ValueFunctionAPI` (`compute_values`,
used by PPO's GAE), `TargetNetworkAPI` (target networks of DQN/SAC-style losses) and
`InferenceOnlyAPI` (a smaller module for EnvRunners) and `SelfSupervisedLossAPI` (a module
computing its own loss).
"""
from __future__ import annotations

import abc
from typing import Any, Callable


#: The key of forward_target's action-distribution inputs (the target network's logits or Q-values).
TARGET_NETWORK_ACTION_DIST_INPUTS = "target_network_action_dist_inputs"


class ValueFunctionAPI(abc.ABC):
    """A module with a value function: `compute_values(batch, embeddings=None) -> tensor [B]`."""

    @abc.abstractmethod
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        """State values of the batch's observations."""


class SelfSupervisedLossAPI(abc.ABC):
    """A module that computes its own loss (RLlib's API, e.g. a curiosity model trained beside the
    policy): a Learner's `compute_losses` calls `compute_self_supervised_loss` for such a module
    instead of its `compute_loss_for_module`."""

    @abc.abstractmethod
    def compute_self_supervised_loss(self, *, learner: Any, module_id: str, config: Any, batch: dict[str, Any],
                                     fwd_out: dict[str, Any]) -> Any:
        """The module's total loss on `batch`, given its `forward_train` output `fwd_out`."""


def value_function(module: Any, needed_by: str) -> Callable[..., Any]:
    """`module.compute_values` (ValueFunctionAPI's method, or one of that name); a TypeError that
    says what to implement where the module has none (`needed_by` names the loss that needs it)."""
    compute_values = getattr(module, "compute_values", None)
    if not callable(compute_values):
        raise TypeError(
            f"{needed_by} needs state values, but the module {type(module).__name__} returns no 'vf_preds' from "
            "forward_train and has no compute_values(batch) method. Implement compute_values "
            "(rlx.core.rl_module.apis.ValueFunctionAPI).")
    return compute_values


class TargetNetworkAPI(abc.ABC):
    """A module with target networks: build them, list (target, online) pairs, and run them."""

    @abc.abstractmethod
    def make_target_networks(self) -> None:
        """Create the target networks (copies of the online ones)."""

    @abc.abstractmethod
    def get_target_network_pairs(self) -> list[tuple[Any, Any]]:
        """[(online network, target network), ...] (RLlib's order) for the learner's target updates."""

    @abc.abstractmethod
    def forward_target(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The target networks' outputs for `batch`."""


class InferenceOnlyAPI(abc.ABC):
    """A module that can drop what only training needs (EnvRunners build it inference_only)."""

    @abc.abstractmethod
    def get_non_inference_attributes(self) -> list[str]:
        """Attribute names (e.g. "vf", "_target_q") that an inference-only module does not build."""
