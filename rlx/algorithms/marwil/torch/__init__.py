"""MARWIL's torch Learner (RLlib's `ray.rllib.algorithms.marwil.torch`)."""
from rlx.algorithms.marwil.torch.marwil_torch_learner import MARWILTorchLearner

__all__ = ["MARWILTorchLearner"]
