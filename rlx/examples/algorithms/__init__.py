"""Example algorithms (RLlib's `ray.rllib.examples.algorithms`)."""
