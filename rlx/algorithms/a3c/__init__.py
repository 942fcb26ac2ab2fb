"""A3C: asynchronous advantage actor-critic (A2C's loss, one gradient per arriving fragment)."""
from rlx.algorithms.a3c.a3c import A3C, DEFAULT_CONFIG, A3CConfig, A3CTrainer, _torch_side

__all__ = ["A3C", "A3CConfig", "A3CLearner", "A3CTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "A3CLearner":  # torch: imported when asked for
        return _torch_side().A3CLearner
    raise AttributeError(name)
