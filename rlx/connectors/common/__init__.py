"""Connector pieces shared by the env-to-module, module-to-env and learner pipelines."""
from rlx.connectors.common.add_observations_from_episodes_to_batch import AddObservationsFromEpisodesToBatch
from rlx.connectors.common.add_states_from_episodes_to_batch import (
    AddStatesFromEpisodesToBatch, AddTimeDimToBatchAndZeroPad)
from rlx.connectors.common.agent_to_module_mapping import AgentToModuleMapping, ModuleToAgentUnmapping
from rlx.connectors.common.batch_individual_items import BatchIndividualItems
from rlx.connectors.common.flatten_observations import FlattenObservations
from rlx.connectors.common.frame_stacking import _FrameStacking
from rlx.connectors.common.numpy_to_tensor import NumpyToTensor, TensorToNumpy

__all__ = [
    "AddObservationsFromEpisodesToBatch", "AddStatesFromEpisodesToBatch", "AddTimeDimToBatchAndZeroPad",
    "AgentToModuleMapping", "BatchIndividualItems", "FlattenObservations", "ModuleToAgentUnmapping",
    "NumpyToTensor", "TensorToNumpy", "_FrameStacking",
]
