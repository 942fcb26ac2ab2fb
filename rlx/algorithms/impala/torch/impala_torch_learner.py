"""IMPALATorchLearner (RLlib's `ray.rllib.algorithms.impala.torch.impala_torch_learner`).

The class custom IMPALA learners subclass: override `compute_loss_for_module` (call super() for
the V-trace loss and add terms), then pass the class to `config.training(learner_class=...)`.
rlx's IMPALALearner is a torch learner already; this class is it under RLlib's name.
"""
from __future__ import annotations

from rlx.algorithms.impala.impala_learner import IMPALALearner

__all__ = ["IMPALATorchLearner", "ImpalaTorchLearner"]


class IMPALATorchLearner(IMPALALearner):
    """IMPALA's Learner (see IMPALALearner): minibatch SGD on the V-trace actor-critic loss."""


ImpalaTorchLearner = IMPALATorchLearner
