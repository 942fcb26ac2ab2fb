"""Example environment classes (RLlib's `ray.rllib.examples.envs.classes`)."""
