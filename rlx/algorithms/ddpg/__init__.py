"""Deep Deterministic Policy Gradient."""
from rlx.algorithms.ddpg.ddpg import DDPG, DEFAULT_CONFIG, DDPGConfig, DDPGTrainer

__all__ = ["DDPG", "DDPGConfig", "DDPGTrainer", "DEFAULT_CONFIG"]
