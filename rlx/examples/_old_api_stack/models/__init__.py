"""Example ModelV2 custom models (RLlib's `ray.rllib.examples._old_api_stack.models`)."""
