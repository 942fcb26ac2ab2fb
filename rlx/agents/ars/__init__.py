"""Old import path of ARS: `import rlx.agents.ars as ars; ars.ARSTrainer(config=ars.DEFAULT_CONFIG, env=...)`."""
from rlx.algorithms.ars.ars import ARS, DEFAULT_CONFIG, ARSConfig, ARSTrainer

__all__ = ["ARS", "ARSConfig", "ARSTrainer", "DEFAULT_CONFIG"]
