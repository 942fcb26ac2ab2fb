"""Old import path of ES: `import rlx.agents.es as es; es.ESTrainer(config=es.DEFAULT_CONFIG, env=...)`."""
from rlx.algorithms.es.es import ES, DEFAULT_CONFIG, ESConfig, ESTrainer

__all__ = ["ES", "ESConfig", "ESTrainer", "DEFAULT_CONFIG"]
