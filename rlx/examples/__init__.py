"""Example envs, models and scripts (RLlib's `ray.rllib.examples`)."""
