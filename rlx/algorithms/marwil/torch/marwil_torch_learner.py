"""MARWILTorchLearner (RLlib's `ray.rllib.algorithms.marwil.torch.marwil_torch_learner`).

The class custom MARWIL/BC learners subclass: override `compute_loss_for_module` (call super()
for MARWIL's loss and add terms), then pass the class to `config.training(learner_class=...)`.
"""
from __future__ import annotations

from rlx.algorithms.marwil.marwil_learner import MARWILLearner
from rlx.core.learner.torch.torch_learner import TorchLearner

__all__ = ["MARWILTorchLearner"]


class MARWILTorchLearner(MARWILLearner, TorchLearner):
    """MARWIL's Learner (see MARWILLearner) under RLlib's torch name."""
