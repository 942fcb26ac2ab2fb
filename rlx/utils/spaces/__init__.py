"""Space helpers (RLlib's `ray.rllib.utils.spaces`)."""
