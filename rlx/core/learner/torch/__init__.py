"""The torch Learner (RLlib's `ray.rllib.core.learner.torch`)."""
from rlx.core.learner.torch.torch_learner import TorchLearner

__all__ = ["TorchLearner"]
