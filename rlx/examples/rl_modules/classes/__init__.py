"""Example RLModule classes (RLlib's `ray.rllib.examples.rl_modules.classes`)."""
