"""ModuleToAgentUnmapping at RLlib's module path."""
from rlx.connectors.common.agent_to_module_mapping import ModuleToAgentUnmapping

__all__ = ["ModuleToAgentUnmapping"]
