"""Example RLModules (RLlib's `ray.rllib.examples.rl_modules`)."""
