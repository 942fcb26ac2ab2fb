"""Old import path of PPO: `import rlx.agents.ppo as ppo; ppo.PPOTrainer(config=ppo.DEFAULT_CONFIG)`."""
from rlx.algorithms.ddppo.ddppo import DDPPO, DDPPOConfig, DDPPOTrainer
from rlx.algorithms.ppo.ppo import DEFAULT_CONFIG, PPO, PPOConfig, PPOTrainer

__all__ = ["PPO", "PPOConfig", "PPOTrainer", "DEFAULT_CONFIG", "DDPPO", "DDPPOConfig", "DDPPOTrainer"]
