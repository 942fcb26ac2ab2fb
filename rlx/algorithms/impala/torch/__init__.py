"""IMPALA's torch Learner (RLlib's `ray.rllib.algorithms.impala.torch`)."""
from rlx.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner, ImpalaTorchLearner

__all__ = ["IMPALATorchLearner", "ImpalaTorchLearner"]
