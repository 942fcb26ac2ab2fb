"""ARS: augmented random search (linear policies, top-direction SGD steps)."""
from rlx.algorithms.ars.ars import ARS, DEFAULT_CONFIG, ARSConfig, ARSTrainer
from rlx.algorithms.ars.ars_learner import ARSLearner

__all__ = ["ARS", "ARSConfig", "ARSLearner", "ARSTrainer", "DEFAULT_CONFIG"]
