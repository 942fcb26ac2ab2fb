"""Old import path of BC: `import rlx.agents.bc as bc; bc.BCTrainer(config=bc.DEFAULT_CONFIG)`."""
from rlx.algorithms.bc.bc import BC, DEFAULT_CONFIG, BCConfig, BCTrainer

__all__ = ["BC", "BCConfig", "BCTrainer", "DEFAULT_CONFIG"]
