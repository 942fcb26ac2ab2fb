"""Old import path of A3C: `import rlx.agents.a3c as a3c; a3c.A3CTrainer(config=a3c.DEFAULT_CONFIG, env=...)`."""
from rlx.algorithms.a3c.a3c import A3C, DEFAULT_CONFIG, A3CConfig, A3CTrainer

__all__ = ["A3C", "A3CConfig", "A3CTrainer", "DEFAULT_CONFIG"]
