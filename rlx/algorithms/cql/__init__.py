"""Conservative Q-Learning: offline SAC with a penalty on the Q-values of actions the data does not take."""
from rlx.algorithms.cql.cql import CQL, CQL_DEFAULT_CONFIG, DEFAULT_CONFIG, CQLConfig, CQLTrainer
from rlx.algorithms.cql.cql_learner import CQLLearner

#: RLlib's torch learner of CQL: rlx's CQLLearner is a torch learner already.
CQLTorchLearner = CQLLearner

__all__ = ["CQL", "CQLConfig", "CQLLearner", "CQLTorchLearner", "CQLTrainer", "DEFAULT_CONFIG", "CQL_DEFAULT_CONFIG"]
