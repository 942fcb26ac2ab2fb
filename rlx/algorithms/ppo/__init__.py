"""Proximal Policy Optimization."""
from rlx.algorithms.ppo.ppo import DEFAULT_CONFIG, PPO, PPOConfig, PPOTrainer

__all__ = ["PPO", "PPOConfig", "PPOTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "PPOLearner":
        from rlx.algorithms.ppo.ppo_learner import PPOLearner

        return PPOLearner
    if name == "PPOTorchLearner":
        from rlx.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

        return PPOTorchLearner
    raise AttributeError(name)
