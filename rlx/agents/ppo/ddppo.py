"""Old import path of DD-PPO: `from rlx.agents.ppo.ddppo import DDPPOTrainer, DEFAULT_CONFIG`."""
from rlx.algorithms.ddppo.ddppo import DDPPO, DEFAULT_CONFIG, DDPPOConfig, DDPPOTrainer

__all__ = ["DDPPO", "DDPPOConfig", "DDPPOTrainer", "DEFAULT_CONFIG"]
