"""Offline RL examples (RLlib's `ray.rllib.examples.offline_rl`)."""
