"""Connectors: the pieces between envs and modules, modules and envs, and sampled data and
Learners (RLlib's ConnectorV2 API). See docs/connectors.md."""
from rlx.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from rlx.connectors.connector_v2 import ConnectorV2

__all__ = ["ConnectorPipelineV2", "ConnectorV2"]
