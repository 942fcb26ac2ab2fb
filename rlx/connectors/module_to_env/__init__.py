"""Module-to-env connector pieces: what happens to the module's outputs before the env steps."""
from rlx.connectors.common import ModuleToAgentUnmapping, TensorToNumpy
from rlx.connectors.module_to_env.get_actions import GetActions
from rlx.connectors.module_to_env.listify_data_for_vector_env import ListifyDataForVectorEnv, UnBatchToIndividualItems
from rlx.connectors.module_to_env.module_to_env_pipeline import ModuleToEnvPipeline
from rlx.connectors.module_to_env.normalize_and_clip_actions import NormalizeAndClipActions
from rlx.connectors.module_to_env.remove_single_ts_time_rank_from_batch import RemoveSingleTsTimeDimFromBatch

__all__ = [
    "GetActions", "ListifyDataForVectorEnv", "ModuleToAgentUnmapping", "ModuleToEnvPipeline",
    "NormalizeAndClipActions", "RemoveSingleTsTimeDimFromBatch", "TensorToNumpy", "UnBatchToIndividualItems",
]
