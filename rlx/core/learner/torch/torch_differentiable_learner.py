"""TorchDifferentiableLearner (RLlib's `ray.rllib.core.learner.torch.torch_differentiable_learner`):
functional gradient-descent steps with `torch.func.functional_call` and `torch.autograd.grad`.

One inner step: forward the module with the given parameter tensors, compute the loss,
take its gradient with `create_graph=True` (so the gradient itself can be differentiated),
and return `params - lr * grad` for the modules in `policies_to_update`. Nothing changes a
module's own parameters; the meta learner differentiates through these steps.
"""
from __future__ import annotations

from typing import Any

import torch

from rlx.core.learner.differentiable_learner import DifferentiableLearner
from rlx.core.learner.functional import NamedParams, functional_forward, sum_losses
from rlx.utils.errors import NonFiniteUpdateError


class TorchDifferentiableLearner(DifferentiableLearner):
    """A DifferentiableLearner whose steps are plain gradient descent on parameter tensors.

    Subclasses define `compute_loss_for_module`. A non-finite gradient raises
    NonFiniteUpdateError naming the parameter; with `config.training(skip_nonfinite_updates=True)`
    that parameter keeps its value for the step instead.
    """

    framework = "torch"

    def _update(self, batch: dict[str, Any], params: NamedParams) -> tuple[Any, dict, NamedParams, dict]:
        """One functional step: (forward outputs, losses, new params, {})."""
        fwd_out = self._make_functional_call(params, batch)
        loss_per_module = self.compute_losses(fwd_out=fwd_out, batch=batch)
        gradients = self.compute_gradients(loss_per_module, params)
        return fwd_out, loss_per_module, self.apply_gradients(gradients, params), {}

    def _make_functional_call(self, params: NamedParams, batch: dict[str, Any]) -> dict[str, Any]:
        """Each module's forward (= forward_train) on its batch, computed with `params`."""
        return functional_forward(self.module, params, batch)

    def compute_gradients(self, loss_per_module: dict[str, torch.Tensor], params: NamedParams,
                          **kwargs: Any) -> NamedParams:
        """d(sum of losses)/d(params), with the graph kept (create_graph) for higher-order
        gradients; a parameter the loss does not use gets None."""
        total = sum_losses(loss_per_module)
        flat = [(mid, name, p) for mid, named in params.items() for name, p in named.items()]
        grads = torch.autograd.grad(total, [p for _, _, p in flat], create_graph=True, retain_graph=True,
                                    allow_unused=True)
        out: NamedParams = {mid: {} for mid in params}
        for (mid, name, _), grad in zip(flat, grads):
            out[mid][name] = grad
        return out

    def apply_gradients(self, gradients: NamedParams, params: NamedParams) -> NamedParams:
        """`params - lr * gradients` for the modules in `policies_to_update` (all when None); the
        others, and parameters without a gradient, stay as they are."""
        lr = float(self.learner_config.lr)
        update_ids = self.learner_config.policies_to_update
        skip_nonfinite = bool(getattr(self.config, "skip_nonfinite_updates", False))
        updated: NamedParams = {}
        for mid, named in params.items():
            grads = gradients.get(mid, {})
            if update_ids is not None and mid not in update_ids:
                updated[mid] = named
                continue
            updated[mid] = {}
            for name, param in named.items():
                grad = grads.get(name)
                if grad is not None and not bool(torch.isfinite(grad).all()):
                    if not skip_nonfinite:
                        raise NonFiniteUpdateError(
                            f"{type(self).__name__}: the inner-loop gradient of {mid}/{name} holds NaN or infinite "
                            "values. Lower the DifferentiableLearnerConfig lr, check the loss, or set "
                            "config.training(skip_nonfinite_updates=True) to keep such parameters unchanged.")
                    grad = None
                updated[mid][name] = param if grad is None else param - lr * grad
        return updated
