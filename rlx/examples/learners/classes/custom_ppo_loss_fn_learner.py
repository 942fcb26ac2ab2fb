"""A PPO Learner whose loss adds a weight regularizer term (RLlib's example class of the same name).

`compute_loss_for_module` takes PPO's loss from super() and adds
`regularizer_coeff * mean(mean of each parameter tensor)`, the coefficient coming from
`config.training(learner_config_dict={"regularizer_coeff": ...})`. The mean weight is
logged to `self.metrics` and shows as `mean_weight` in the learner results.
"""
from __future__ import annotations

from typing import Any

import torch

from rlx.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner


class PPOTorchLearnerWithWeightRegularizerLoss(PPOTorchLearner):
    """PPO plus `regularizer_coeff` times the mean parameter value of the module."""

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        ppo_loss = super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)
        coeff = float(config.learner_config_dict.get("regularizer_coeff", 0.0))
        weights = self.get_parameters(self.module[module_id])
        # The mean of the per-tensor means: every tensor counts once, whatever its size.
        mean_weight = torch.stack([w.mean() for w in weights]).mean()
        self.metrics.log_value(key=(module_id, "mean_weight"), value=mean_weight.detach(), window=1)
        return ppo_loss + coeff * mean_weight
