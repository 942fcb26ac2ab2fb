"""MAMLTorchMetaLearner: the MAML example's meta learner (RLlib's
`ray.rllib.examples.algorithms.classes.maml_lr_meta_learner`)."""
from __future__ import annotations

from typing import Any

import torch

from rlx.core.learner.torch.torch_meta_learner import TorchMetaLearner


class MAMLTorchMetaLearner(TorchMetaLearner):
    """Trains the starting parameters so that a few inner steps fit a new sinusoid task: its loss
    is the MSE of the adapted parameters on held-out points of the same task (the inner
    learners' losses are not needed)."""

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any],
                                others_loss_per_module: list[dict[str, torch.Tensor]] | None = None) -> torch.Tensor:
        """MSE between the (adapted) prediction and the labels `y`."""
        return torch.nn.functional.mse_loss(fwd_out["y_pred"], batch["y"])
