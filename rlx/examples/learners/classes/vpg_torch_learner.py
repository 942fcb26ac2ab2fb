"""VPGTorchLearner: the Learner of the VPG example algorithm (RLlib's example class of that name).

`build()` prepends `ComputeReturnsToGo` to the learner connector pipeline (so every batch has
RETURNS_TO_GO), `compute_loss_for_module` is the plain policy-gradient loss
-mean(logp(action) * return-to-go), and `after_gradient_based_update` reports each module's mean
weight when `config.report_mean_weights` is set.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.connectors.learner import ComputeReturnsToGo
from rlx.core.columns import Columns
from rlx.core.learner.torch.torch_learner import TorchLearner
from rlx.utils.numpy import convert_to_numpy


class VPGTorchLearner(TorchLearner):
    """Vanilla policy gradient without baseline, on batches with returns-to-go."""

    def build(self) -> None:
        """TorchLearner.build, then ComputeReturnsToGo(gamma) first in the learner pipeline."""
        super().build()
        if self.config.add_default_connectors_to_learner_pipeline:
            self._learner_connector.prepend(ComputeReturnsToGo(gamma=self.config.gamma))

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """-mean(logp(actions) * returns_to_go), logging the mean return-to-go per action taken."""
        rl_module = self.module[module_id]
        action_dist = rl_module.get_train_action_dist_cls().from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        log_probs = action_dist.logp(batch[Columns.ACTIONS])
        loss = -torch.mean(log_probs * batch[Columns.RETURNS_TO_GO])
        for action in torch.unique(batch[Columns.ACTIONS]).tolist():
            taken = batch[Columns.ACTIONS] == action
            self.metrics.log_value(key=(module_id, f"action_{action}_return_to_go_mean"),
                                   value=float(batch[Columns.RETURNS_TO_GO][taken].mean()), reduce="mean")
        return loss

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """The Learner's hook, plus each module's mean weight when `config.report_mean_weights`."""
        super().after_gradient_based_update(timesteps=timesteps)
        if getattr(self.config, "report_mean_weights", False):
            for module_id in self.module.keys():
                parameters = convert_to_numpy(self.get_parameters(self.module[module_id]))
                self.metrics.log_value((module_id, "mean_weight"), float(np.mean([w.mean() for w in parameters])),
                                       window=1)
