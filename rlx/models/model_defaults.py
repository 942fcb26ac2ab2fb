"""MODEL_DEFAULTS and the model-dict checks at their old path.

They live in the core layer, `rlx.core.model_defaults`; these are the same objects.
"""
from rlx.core.model_defaults import (ACTIVATIONS, MODEL_DEFAULTS, NEW_STACK_NAMES, ONLY_WITH, check_conv_filters,
                                     merge_model_config)

__all__ = ["ACTIVATIONS", "MODEL_DEFAULTS", "NEW_STACK_NAMES", "ONLY_WITH", "check_conv_filters",
           "merge_model_config"]
