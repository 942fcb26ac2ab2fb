"""ModuleToEnvPipeline: the connector pipeline between the module's outputs and the env."""
from __future__ import annotations

from rlx.connectors.connector_pipeline_v2 import ConnectorPipelineV2


class ModuleToEnvPipeline(ConnectorPipelineV2):
    """The module-to-env pipeline: its pieces turn the module's outputs into what the env steps with."""
