"""MAMLTorchDifferentiableLearner: the MAML example's inner learner (RLlib's
`ray.rllib.examples.algorithms.classes.maml_lr_differentiable_learner`)."""
from __future__ import annotations

from typing import Any

import torch

from rlx.core.learner.torch.torch_differentiable_learner import TorchDifferentiableLearner


class MAMLTorchDifferentiableLearner(TorchDifferentiableLearner):
    """Adapts to one sinusoid task with functional gradient steps on the mean squared error."""

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """MSE between the prediction and the task's labels `y`."""
        return torch.nn.functional.mse_loss(fwd_out["y_pred"], batch["y"])
