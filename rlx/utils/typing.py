"""Type aliases of RLlib's `ray.rllib.utils.typing` that user code imports."""
from __future__ import annotations

from typing import Any, Dict, Hashable, Union

import numpy as np

#: An agent's id in a multi-agent env (usually a str or an int).
AgentID = Hashable
#: A policy's id ("default_policy", "p0", ...).
PolicyID = str
#: A module's id in a MultiRLModule (the same ids as policies).
ModuleID = str
#: A dict keyed by agent id: observations, actions, rewards, flags or infos of one step.
MultiAgentDict = Dict[Any, Any]
#: A dict of env observations, actions or infos keyed by agent id (old name).
EnvObsType = Any
EnvActionType = Any
EnvInfoDict = Dict[str, Any]
#: A SingleAgentEpisode or MultiAgentEpisode.
EpisodeType = Any
#: The value a connector or module passes on (nested dicts of arrays or tensors).
StateDict = Dict[str, Any]
#: An algorithm config as a plain dict (old API).
AlgorithmConfigDict = Dict[str, Any]
PartialAlgorithmConfigDict = Dict[str, Any]
#: A NumPy array, a torch tensor or a (nested) structure of them.
TensorType = Any
TensorStructType = Union[TensorType, Dict[str, Any], tuple, list]
#: Model weights: {parameter name: array}.
ModelWeights = Dict[str, np.ndarray]
#: The result dict of one `Algorithm.train()` call.
ResultDict = Dict[str, Any]
