"""Old import path of APEX-DQN: `from rlx.agents.dqn.apex import ApexTrainer, APEX_DEFAULT_CONFIG`."""
from rlx.algorithms.apex_dqn.apex_dqn import APEX_DEFAULT_CONFIG, ApexDQN, ApexDQNConfig, ApexTrainer

__all__ = ["ApexDQN", "ApexDQNConfig", "ApexTrainer", "APEX_DEFAULT_CONFIG"]
