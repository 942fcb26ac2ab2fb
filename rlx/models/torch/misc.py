"""Small layers of old-API PyTorch models at RLlib's path (`ray.rllib.models.torch.misc`).

They live in the core layer, `rlx.core.models.v2.misc`; these are the same objects.
"""
from rlx.core.models.v2.misc import (AppendBiasLayer, SlimFC, get_activation_fn, normc_initializer, same_padding,
                                     valid_padding)

__all__ = ["SlimFC", "normc_initializer", "AppendBiasLayer", "get_activation_fn", "same_padding", "valid_padding"]
