"""Old import path of SAC: `import rlx.agents.sac as sac; sac.SACTrainer(config=sac.DEFAULT_CONFIG)`."""
from rlx.algorithms.sac.sac import DEFAULT_CONFIG, SAC, SACConfig, SACTrainer

__all__ = ["SAC", "SACConfig", "SACTrainer", "DEFAULT_CONFIG"]
