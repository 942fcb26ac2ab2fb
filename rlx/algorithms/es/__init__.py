"""ES: evolution strategies (antithetic parameter perturbations, rank-normalised returns)."""
from rlx.algorithms.es.es import DEFAULT_CONFIG, ES, ESConfig, ESTrainer
from rlx.algorithms.es.es_learner import ESLearner

__all__ = ["ES", "ESConfig", "ESLearner", "ESTrainer", "DEFAULT_CONFIG"]
