"""Old import path of CQL: `import rlx.agents.cql as cql; cql.CQLTrainer(config=cql.CQL_DEFAULT_CONFIG)`."""
from rlx.algorithms.cql.cql import CQL, CQL_DEFAULT_CONFIG, DEFAULT_CONFIG, CQLConfig, CQLTrainer

__all__ = ["CQL", "CQLConfig", "CQLTrainer", "DEFAULT_CONFIG", "CQL_DEFAULT_CONFIG"]
