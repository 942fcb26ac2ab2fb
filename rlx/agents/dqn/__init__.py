"""Old import path of DQN: `import rlx.agents.dqn as dqn; dqn.DQNTrainer(config=dqn.DEFAULT_CONFIG)`."""
from rlx.algorithms.apex_dqn.apex_dqn import APEX_DEFAULT_CONFIG, ApexDQN, ApexDQNConfig, ApexTrainer
from rlx.algorithms.dqn.dqn import DEFAULT_CONFIG, DQN, DQNConfig, DQNTrainer

__all__ = ["DQN", "DQNConfig", "DQNTrainer", "DEFAULT_CONFIG", "ApexDQN", "ApexDQNConfig", "ApexTrainer",
           "APEX_DEFAULT_CONFIG"]
