"""Learner connector pieces: what happens to a train batch before the Learner updates on it."""
from rlx.connectors.common import (
    AddObservationsFromEpisodesToBatch, AddStatesFromEpisodesToBatch, AddTimeDimToBatchAndZeroPad,
    AgentToModuleMapping, BatchIndividualItems, NumpyToTensor)
from rlx.connectors.learner.add_columns_from_episodes_to_train_batch import (
    AddColumnsFromEpisodesToTrainBatch, AddInfosFromEpisodesToTrainBatch, AddNextObservationsFromEpisodesToTrainBatch,
    AddOneTsToEpisodesAndTruncate)
from rlx.connectors.learner.compute_returns_to_go import ComputeReturnsToGo
from rlx.connectors.learner.frame_stacking import FrameStackingLearner
from rlx.connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from rlx.connectors.learner.learner_connector_pipeline import LearnerConnectorPipeline

__all__ = [
    "AddColumnsFromEpisodesToTrainBatch", "AddInfosFromEpisodesToTrainBatch",
    "AddNextObservationsFromEpisodesToTrainBatch", "AddObservationsFromEpisodesToBatch", "AddOneTsToEpisodesAndTruncate",
    "AddStatesFromEpisodesToBatch", "AddTimeDimToBatchAndZeroPad", "AgentToModuleMapping", "BatchIndividualItems",
    "ComputeReturnsToGo", "FrameStackingLearner", "GeneralAdvantageEstimation", "LearnerConnectorPipeline",
    "NumpyToTensor",
]
