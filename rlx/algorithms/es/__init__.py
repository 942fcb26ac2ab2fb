"""ES: evolution strategies (antithetic parameter perturbations, rank-normalised returns)."""
from rlx.algorithms.es.es import DEFAULT_CONFIG, ES, ESConfig, ESTrainer

__all__ = ["ES", "ESConfig", "ESTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "ESLearner":
        from rlx.algorithms.es.es_learner import ESLearner

        return ESLearner
    raise AttributeError(name)
