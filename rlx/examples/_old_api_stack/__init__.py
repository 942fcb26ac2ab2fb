"""Old-API-stack examples (RLlib's `ray.rllib.examples._old_api_stack`): custom ModelV2s."""
