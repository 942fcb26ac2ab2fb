"""DD-PPO: decentralized distributed PPO."""
from rlx.algorithms.ddppo.ddppo import DDPPO, DEFAULT_CONFIG, DDPPOConfig, DDPPOTrainer

__all__ = ["DDPPO", "DDPPOConfig", "DDPPOTrainer", "DEFAULT_CONFIG"]
