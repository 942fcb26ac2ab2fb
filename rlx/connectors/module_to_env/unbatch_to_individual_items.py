"""UnBatchToIndividualItems at RLlib's module path."""
from rlx.connectors.module_to_env.listify_data_for_vector_env import UnBatchToIndividualItems

__all__ = ["UnBatchToIndividualItems"]
