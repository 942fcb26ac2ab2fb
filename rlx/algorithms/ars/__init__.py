"""ARS: augmented random search (linear policies, top-direction SGD steps)."""
from rlx.algorithms.ars.ars import ARS, DEFAULT_CONFIG, ARSConfig, ARSTrainer

__all__ = ["ARS", "ARSConfig", "ARSTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "ARSLearner":
        from rlx.algorithms.ars.ars_learner import ARSLearner

        return ARSLearner
    raise AttributeError(name)
