"""TorchLearner (RLlib's `ray.rllib.core.learner.torch.torch_learner`).

rlx is PyTorch-only, so every rlx Learner is a torch learner already: `TorchLearner` is the
base class RLlib's custom torch learners subclass, with RLlib's torch-specific helpers.
Override `configure_optimizers_for_module` to register optimizers (see
`Learner.register_optimizer`) and `compute_loss_for_module` for the loss of an algorithm
whose update goes through it (PPO's does: `rlx.algorithms.ppo.torch.ppo_torch_learner`).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from rlx.core.learner.functional import sum_losses
from rlx.core.learner.learner import DEFAULT_OPTIMIZER, Learner, clip_gradients_dict

__all__ = ["TorchLearner", "DEFAULT_OPTIMIZER"]


class TorchLearner(Learner):
    """A Learner whose module and optimizers are torch's (as every rlx Learner's are)."""

    framework = "torch"

    @staticmethod
    def _get_clip_function() -> Callable[..., Any]:
        """fn(gradients_dict, *, grad_clip=None, grad_clip_by='value') clipping in place."""
        return clip_gradients_dict

    @staticmethod
    def _get_global_norm_function() -> Callable[[list[torch.Tensor]], torch.Tensor]:
        """fn(tensors) -> their global L2 norm."""
        return _global_norm

    def get_param_ref(self, param: torch.Tensor) -> torch.Tensor:
        """A hashable reference to `param` (the tensor itself, as in RLlib's TorchLearner)."""
        return param

    def compute_gradients(self, loss_per_module: Mapping[str, torch.Tensor], **kwargs: Any) -> dict[Any, torch.Tensor]:
        """{param: gradient} of the summed losses for every parameter an optimizer steps (the
        gradients are also left in each parameter's `.grad`)."""
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=True)
        total = sum_losses(loss_per_module)
        self.precision.backward(total)
        for opt in self.optimizers.values():
            self.precision.unscale(opt)
        return {p: p.grad for params in self._optimizer_params.values() for p in params if p.grad is not None}

    def apply_gradients(self, gradients_dict: Mapping[Any, torch.Tensor]) -> None:
        """Set each parameter's gradient from `gradients_dict` and step every optimizer."""
        for param, grad in gradients_dict.items():
            param.grad = grad
        for opt in self.optimizers.values():
            self.precision.step(opt)
        self.precision.update()


def _global_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    tensors = [t for t in tensors if t is not None]
    if not tensors:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors)))
