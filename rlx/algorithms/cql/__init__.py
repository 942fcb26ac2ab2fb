"""Conservative Q-Learning: offline SAC with a penalty on the Q-values of actions the data does not take."""
from rlx.algorithms.cql.cql import CQL, CQL_DEFAULT_CONFIG, DEFAULT_CONFIG, CQLConfig, CQLTrainer

__all__ = ["CQL", "CQLConfig", "CQLTrainer", "DEFAULT_CONFIG", "CQL_DEFAULT_CONFIG"]


def __getattr__(name: str):
    if name in ("CQLLearner", "CQLTorchLearner"):
        from rlx.algorithms.cql.cql_learner import CQLLearner

        return CQLLearner
    raise AttributeError(name)
