"""AddOneTsToEpisodesAndTruncate at RLlib's module path."""
from rlx.connectors.learner.add_columns_from_episodes_to_train_batch import AddOneTsToEpisodesAndTruncate

__all__ = ["AddOneTsToEpisodesAndTruncate"]
