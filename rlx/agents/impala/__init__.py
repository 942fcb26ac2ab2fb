"""Old import path of IMPALA: `import rlx.agents.impala as impala; impala.ImpalaTrainer(config=...)`."""
from rlx.algorithms.impala.impala import DEFAULT_CONFIG, IMPALA, Impala, ImpalaConfig, IMPALAConfig, ImpalaTrainer

__all__ = ["IMPALA", "IMPALAConfig", "Impala", "ImpalaConfig", "ImpalaTrainer", "DEFAULT_CONFIG"]
