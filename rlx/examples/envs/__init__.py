"""Example environments (RLlib's `ray.rllib.examples.envs`)."""
