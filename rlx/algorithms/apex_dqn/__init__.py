"""APEX-DQN: DQN with Ape-X's distributed prioritized replay."""
from rlx.algorithms.apex_dqn.apex_dqn import APEX_DEFAULT_CONFIG, ApexDQN, ApexDQNConfig, ApexTrainer

__all__ = ["ApexDQN", "ApexDQNConfig", "ApexTrainer", "APEX_DEFAULT_CONFIG"]
