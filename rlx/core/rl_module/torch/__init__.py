"""PyTorch RLModules (rlx's RLModules are all PyTorch)."""
from rlx.core.rl_module.torch.torch_rl_module import TorchRLModule

__all__ = ["TorchRLModule"]
