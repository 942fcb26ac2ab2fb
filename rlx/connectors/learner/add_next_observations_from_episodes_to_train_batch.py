"""AddNextObservationsFromEpisodesToTrainBatch at RLlib's module path."""
from rlx.connectors.learner.add_columns_from_episodes_to_train_batch import AddNextObservationsFromEpisodesToTrainBatch

__all__ = ["AddNextObservationsFromEpisodesToTrainBatch"]
