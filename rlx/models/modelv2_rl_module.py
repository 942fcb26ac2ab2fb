"""ModelV2RLModule (the RLModule that runs an old-API `custom_model`) at its old path.

The algorithm base builds it, so it lives in the core layer, `rlx.core.models.v2.modelv2_rl_module`;
this is the same class (checkpoints that name `rlx.models.modelv2_rl_module:ModelV2RLModule` load it).
"""
from rlx.core.models.v2.modelv2_rl_module import ModelV2RLModule

__all__ = ["ModelV2RLModule"]
