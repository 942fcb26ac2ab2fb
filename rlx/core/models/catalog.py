"""Catalog at RLlib's path (`ray.rllib.core.models.catalog`).

The catalog lives in the core layer, `rlx.core.catalog` (outside this package, whose
`ActorCriticModule` is an RLModule, so that RLModule can read catalogs); these are the same objects.
"""
from rlx.core.catalog import INIT_KEYS, Catalog, EncoderConfig, check_framework, model_config_as_dict

__all__ = ["Catalog", "EncoderConfig", "INIT_KEYS", "check_framework", "model_config_as_dict"]
