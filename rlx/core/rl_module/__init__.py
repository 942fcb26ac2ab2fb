"""RLModules: `RLModule` (one network) and `MultiRLModule` (a dict of them, one per module id),
with RLlib's submodules: `rl_module`, `multi_rl_module`, `default_model_config`, `apis` and
`torch.torch_rl_module`; and `agent_mapping` (PolicySpec, the policy-mapping function).

The module classes load torch, so they are imported on first use: `rlx.core.rl_module.agent_mapping`
stays light for the config layer.
"""
from __future__ import annotations

from typing import Any

__all__ = ["MultiRLModule", "MultiRLModuleSpec", "RLModule", "RLModuleSpec", "SingleAgentRLModuleSpec"]


def __getattr__(name: str) -> Any:
    if name in ("MultiRLModule", "MultiRLModuleSpec"):
        from rlx.core.rl_module import multi_rl_module  # torch: on first use

        return getattr(multi_rl_module, name)
    if name in ("RLModule", "RLModuleSpec", "SingleAgentRLModuleSpec"):
        from rlx.core.rl_module import rl_module  # torch: on first use

        return getattr(rl_module, name)
    raise AttributeError(f"module 'rlx.core.rl_module' has no attribute {name!r}")
