"""RLlib's path of the old API's ModelV2 (compat alias): the class and its helpers live in
rlx.core.modelv2; these are the same objects."""
from rlx.core.modelv2 import ModelV2, flatten, restore_original_dimensions

__all__ = ["ModelV2", "flatten", "restore_original_dimensions"]
