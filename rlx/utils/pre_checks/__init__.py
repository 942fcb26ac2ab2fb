"""Checks run before an experiment (RLlib's `ray.rllib.utils.pre_checks`): the env checker."""
