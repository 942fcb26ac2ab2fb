"""FullyConnectedNetwork at RLlib's path (`ray.rllib.models.torch.fcnet`).

It lives in the core layer, `rlx.core.models.v2.fcnet`; this is the same class.
"""
from rlx.core.models.v2.fcnet import FullyConnectedNetwork

__all__ = ["FullyConnectedNetwork"]
