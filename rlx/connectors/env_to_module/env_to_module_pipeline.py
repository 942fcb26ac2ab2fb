"""EnvToModulePipeline: the connector pipeline between an env's observations and the module."""
from __future__ import annotations

from rlx.connectors.connector_pipeline_v2 import ConnectorPipelineV2


class EnvToModulePipeline(ConnectorPipelineV2):
    """The env-to-module pipeline: its pieces see each sub-env's episode and rewrite the latest
    observation (or add it to the batch) before the module acts on it."""
