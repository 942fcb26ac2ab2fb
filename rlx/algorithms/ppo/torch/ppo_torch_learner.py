"""PPOTorchLearner (RLlib's `ray.rllib.algorithms.ppo.torch.ppo_torch_learner`).

The class custom PPO learners subclass: override `compute_loss_for_module` (call super() for
PPO's loss and add terms) or `configure_optimizers_for_module` (register several optimizers
with `register_optimizer`), then pass the class to `config.training(learner_class=...)`.
rlx's PPOLearner is a torch learner already; this class is it under RLlib's name.
"""
from __future__ import annotations

from rlx.algorithms.ppo.ppo_learner import PPOLearner
from rlx.core.learner.torch.torch_learner import TorchLearner

__all__ = ["PPOTorchLearner"]


class PPOTorchLearner(PPOLearner, TorchLearner):
    """PPO's Learner (see PPOLearner): GAE, then minibatch SGD on the clipped surrogate loss,
    computed by `compute_loss_for_module`."""
