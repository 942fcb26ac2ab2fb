"""BC: behavior cloning from offline data (MARWIL with beta=0)."""
from rlx.algorithms.bc.bc import BC, DEFAULT_CONFIG, BCConfig, BCTrainer

__all__ = ["BC", "BCConfig", "BCTrainer", "DEFAULT_CONFIG"]
