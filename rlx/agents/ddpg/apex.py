"""Old import path of APEX-DDPG: `from rlx.agents.ddpg.apex import ApexDDPGTrainer`."""
from rlx.algorithms.apex_ddpg.apex_ddpg import APEX_DDPG_DEFAULT_CONFIG, ApexDDPG, ApexDDPGConfig, ApexDDPGTrainer

__all__ = ["ApexDDPG", "ApexDDPGConfig", "ApexDDPGTrainer", "APEX_DDPG_DEFAULT_CONFIG"]
