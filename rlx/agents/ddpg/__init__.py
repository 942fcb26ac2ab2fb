"""Old import path of DDPG: `import rlx.agents.ddpg as ddpg; ddpg.DDPGTrainer(config=ddpg.DEFAULT_CONFIG)`."""
from rlx.algorithms.apex_ddpg.apex_ddpg import APEX_DDPG_DEFAULT_CONFIG, ApexDDPG, ApexDDPGConfig, ApexDDPGTrainer
from rlx.algorithms.ddpg.ddpg import DDPG, DEFAULT_CONFIG, DDPGConfig, DDPGTrainer

__all__ = ["DDPG", "DDPGConfig", "DDPGTrainer", "DEFAULT_CONFIG", "ApexDDPG", "ApexDDPGConfig", "ApexDDPGTrainer",
           "APEX_DDPG_DEFAULT_CONFIG"]
