"""A2C: synchronous advantage actor-critic."""
from rlx.algorithms.a2c.a2c import A2C, DEFAULT_CONFIG, A2CConfig, A2CTrainer

__all__ = ["A2C", "A2CConfig", "A2CTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "A2CLearner":
        from rlx.algorithms.a2c.a2c_learner import A2CLearner

        return A2CLearner
    raise AttributeError(name)
