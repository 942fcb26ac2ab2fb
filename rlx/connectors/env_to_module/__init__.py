"""Env-to-module connector pieces: what happens to observations between the env and the module."""
from rlx.connectors.common import (
    AddObservationsFromEpisodesToBatch, AddStatesFromEpisodesToBatch, AddTimeDimToBatchAndZeroPad,
    AgentToModuleMapping, BatchIndividualItems, FlattenObservations, NumpyToTensor)
from rlx.connectors.env_to_module.env_to_module_pipeline import EnvToModulePipeline
from rlx.connectors.env_to_module.frame_stacking import FrameStackingEnvToModule
from rlx.connectors.env_to_module.mean_std_filter import MeanStdFilter
from rlx.connectors.env_to_module.observation_preprocessor import (
    MultiAgentObservationPreprocessor, ObservationPreprocessor, SingleAgentObservationPreprocessor)
from rlx.connectors.env_to_module.prev_actions_prev_rewards import PrevActionsPrevRewards
from rlx.connectors.env_to_module.write_observations_to_episodes import WriteObservationsToEpisodes

__all__ = [
    "AddObservationsFromEpisodesToBatch", "AddStatesFromEpisodesToBatch", "AddTimeDimToBatchAndZeroPad",
    "AgentToModuleMapping", "BatchIndividualItems", "EnvToModulePipeline", "FlattenObservations",
    "FrameStackingEnvToModule", "MeanStdFilter", "MultiAgentObservationPreprocessor", "NumpyToTensor",
    "ObservationPreprocessor", "PrevActionsPrevRewards", "SingleAgentObservationPreprocessor",
    "WriteObservationsToEpisodes",
]
