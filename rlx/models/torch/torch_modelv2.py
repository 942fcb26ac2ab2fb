"""TorchModelV2 at RLlib's path (`ray.rllib.models.torch.torch_modelv2`).

It lives in the core layer, `rlx.core.models.v2.torch_modelv2`; this is the same class.
"""
from rlx.core.models.v2.torch_modelv2 import TorchModelV2

__all__ = ["TorchModelV2"]
