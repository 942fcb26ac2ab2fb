"""The classes of the example algorithms (RLlib's `ray.rllib.examples.algorithms.classes`)."""
