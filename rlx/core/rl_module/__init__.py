"""RLModules: `RLModule` (one network) and `MultiRLModule` (a dict of them, one per module id),
with RLlib's submodules: `rl_module`, `multi_rl_module`, `default_model_config`, `apis` and
`torch.torch_rl_module`."""
from rlx.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec, SingleAgentRLModuleSpec

__all__ = ["MultiRLModule", "MultiRLModuleSpec", "RLModule", "RLModuleSpec", "SingleAgentRLModuleSpec"]
