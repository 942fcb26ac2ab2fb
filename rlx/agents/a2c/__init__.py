"""Old import path of A2C: `import rlx.agents.a2c as a2c; a2c.A2CTrainer(config=a2c.DEFAULT_CONFIG, env=...)`."""
from rlx.algorithms.a2c.a2c import A2C, DEFAULT_CONFIG, A2CConfig, A2CTrainer

__all__ = ["A2C", "A2CConfig", "A2CTrainer", "DEFAULT_CONFIG"]
