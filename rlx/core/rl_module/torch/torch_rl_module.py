"""TorchRLModule: RLlib's name for an RLModule built on PyTorch, which every rlx RLModule is."""
from rlx.core.rl_module.rl_module import RLModule


class TorchRLModule(RLModule):
    """An RLModule (a `torch.nn.Module`); subclass it or RLModule, they are the same base."""


__all__ = ["TorchRLModule"]
