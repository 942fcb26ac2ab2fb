"""Old import path of APPO: `import rlx.agents.appo as appo; appo.APPOTrainer(config=appo.DEFAULT_CONFIG)`."""
from rlx.algorithms.appo.appo import APPO, DEFAULT_CONFIG, APPOConfig, APPOTrainer

__all__ = ["APPO", "APPOConfig", "APPOTrainer", "DEFAULT_CONFIG"]
