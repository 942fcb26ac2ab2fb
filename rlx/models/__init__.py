"""Model configuration defaults and observation preprocessors (old `ray.rllib.models` path)."""
from rlx.models.model_defaults import MODEL_DEFAULTS

__all__ = ["MODEL_DEFAULTS"]
