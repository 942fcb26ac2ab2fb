"""Helpers of the example envs."""
