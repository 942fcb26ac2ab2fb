"""Old-API-stack example policies (RLlib's `ray.rllib.examples._old_api_stack.policy`)."""
