"""PG: vanilla policy gradient (REINFORCE)."""
from rlx.algorithms.pg.pg import DEFAULT_CONFIG, PG, PGConfig, PGTrainer

__all__ = ["PG", "PGConfig", "PGTrainer", "DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name == "PGLearner":
        from rlx.algorithms.pg.pg_learner import PGLearner

        return PGLearner
    raise AttributeError(name)
