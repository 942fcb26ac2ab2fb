"""VPGTorchLearnerSharedOptimizer: VPGTorchLearner with one optimizer over all of its modules
(RLlib's example class of that name, for the shared-encoder example).

When several policies share an encoder inside one MultiRLModule, one optimizer must step all
parameters together: separate optimizers would each move the shared encoder in turn.
"""
from __future__ import annotations

import torch

from rlx.examples.learners.classes.vpg_torch_learner import VPGTorchLearner


class VPGTorchLearnerSharedOptimizer(VPGTorchLearner):
    """VPGTorchLearner whose single Adam optimizer ("shared_optimizer") steps every compatible module."""

    def configure_optimizers(self) -> None:
        """One Adam optimizer over the parameters of every module this Learner can train."""
        params = []
        for module in self.module.values():
            if self.rl_module_is_compatible(module):
                params.extend(module.parameters())
        self.register_optimizer(optimizer_name="shared_optimizer", optimizer=torch.optim.Adam(params=params),
                                params=params, lr_or_lr_schedule=self.config.lr)
