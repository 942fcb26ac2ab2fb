"""Environment creation, checking and vectorized stepping."""
from typing import Any

from rlx.env.env_context import EnvContext
from rlx.utils.registry import register_env

__all__ = ["EnvContext", "register_env", "MultiAgentEnv", "make_multi_agent", "PettingZooEnv",
           "ParallelPettingZooEnv", "ExternalEnv", "ExternalMultiAgentEnv", "PolicyClient", "PolicyServerInput"]

#: Imported on first use, so `import rlx` does not import gymnasium.
_LAZY = {
    "MultiAgentEnv": "rlx.env.multi_agent_env",
    "make_multi_agent": "rlx.env.multi_agent_env",
    "PettingZooEnv": "rlx.env.wrappers.pettingzoo_env",
    "ParallelPettingZooEnv": "rlx.env.wrappers.pettingzoo_env",
    "ExternalEnv": "rlx.env.external_env",
    "ExternalMultiAgentEnv": "rlx.env.external_multi_agent_env",
    "PolicyClient": "rlx.env.policy_client",
    "PolicyServerInput": "rlx.env.policy_server_input",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx.env' has no attribute {name!r}")
