"""Debugging helpers at RLlib's paths (`ray.rllib.utils.debug`)."""
from rlx.utils.debug.deterministic import update_global_seed_if_necessary

__all__ = ["update_global_seed_if_necessary"]
