"""Old import path of PG: `import rlx.agents.pg as pg; pg.PGTrainer(config=pg.DEFAULT_CONFIG, env=...)`."""
from rlx.algorithms.pg.pg import DEFAULT_CONFIG, PG, PGConfig, PGTrainer

__all__ = ["PG", "PGConfig", "PGTrainer", "DEFAULT_CONFIG"]
