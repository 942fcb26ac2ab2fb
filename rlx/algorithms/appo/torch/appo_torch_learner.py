"""APPOTorchLearner (RLlib's `ray.rllib.algorithms.appo.torch.appo_torch_learner`).

The class custom APPO learners subclass: override `compute_loss_for_module` (call super() for
APPO's loss and add terms), then pass the class to `config.training(learner_class=...)`.
rlx's APPOLearner is a torch learner already; this class is it under RLlib's name.
"""
from __future__ import annotations

from rlx.algorithms.appo.appo_learner import APPOLearner

__all__ = ["APPOTorchLearner"]


class APPOTorchLearner(APPOLearner):
    """APPO's Learner (see APPOLearner): V-trace, the clipped surrogate and a target network."""
