"""APPO's torch Learner (RLlib's `ray.rllib.algorithms.appo.torch`)."""
from rlx.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner

__all__ = ["APPOTorchLearner"]
