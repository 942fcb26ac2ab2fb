"""A3C: asynchronous advantage actor-critic (A2C's loss, one gradient per arriving fragment)."""
from rlx.algorithms.a3c.a3c import A3C, DEFAULT_CONFIG, A3CConfig, A3CTrainer

__all__ = ["A3C", "A3CConfig", "A3CTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "A3CLearner":
        from rlx.algorithms.a2c.a2c_learner import A2CLearner

        return A2CLearner
    raise AttributeError(name)
