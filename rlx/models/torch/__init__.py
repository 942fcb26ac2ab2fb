"""PyTorch old-API models (RLlib's `ray.rllib.models.torch`)."""
from rlx.models.torch.fcnet import FullyConnectedNetwork
from rlx.models.torch.torch_modelv2 import TorchModelV2

__all__ = ["FullyConnectedNetwork", "TorchModelV2"]
