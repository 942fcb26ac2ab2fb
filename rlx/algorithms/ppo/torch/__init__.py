"""PPO's torch Learner (RLlib's `ray.rllib.algorithms.ppo.torch`)."""
from rlx.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

__all__ = ["PPOTorchLearner"]
