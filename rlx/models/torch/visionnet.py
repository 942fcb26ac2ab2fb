"""VisionNetwork at RLlib's path (`ray.rllib.models.torch.visionnet`).

It lives in the core layer, `rlx.core.models.v2.visionnet`; this is the same class.
"""
from rlx.core.models.v2.visionnet import VisionNetwork

__all__ = ["VisionNetwork"]
