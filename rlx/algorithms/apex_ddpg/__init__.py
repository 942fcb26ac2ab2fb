"""APEX-DDPG: DDPG with Ape-X's distributed prioritized replay."""
from rlx.algorithms.apex_ddpg.apex_ddpg import APEX_DDPG_DEFAULT_CONFIG, ApexDDPG, ApexDDPGConfig, ApexDDPGTrainer

__all__ = ["ApexDDPG", "ApexDDPGConfig", "ApexDDPGTrainer", "APEX_DDPG_DEFAULT_CONFIG"]
