"""Deep Q-Networks with the Rainbow options."""
from rlx.algorithms.dqn.dqn import DEFAULT_CONFIG, DQN, DQNConfig, DQNTrainer

__all__ = ["DQN", "DQNConfig", "DQNTrainer", "DEFAULT_CONFIG"]
