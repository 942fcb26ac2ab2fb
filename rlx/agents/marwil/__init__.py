"""Old import path of MARWIL and BC: `from rlx.agents.marwil import MARWILTrainer, BCTrainer, BC_DEFAULT_CONFIG`."""
from rlx.algorithms.bc.bc import DEFAULT_CONFIG as BC_DEFAULT_CONFIG
from rlx.algorithms.bc.bc import BC, BCConfig, BCTrainer
from rlx.algorithms.marwil.marwil import DEFAULT_CONFIG, MARWIL, MARWILConfig, MARWILTrainer

__all__ = ["MARWIL", "MARWILConfig", "MARWILTrainer", "DEFAULT_CONFIG", "BC", "BCConfig", "BCTrainer",
           "BC_DEFAULT_CONFIG"]
