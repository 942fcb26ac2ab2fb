"""Creators of Gymnasium envs reset once with a fixed seed.

RLlib's `ray.rllib.examples.envs.classes.deterministic_envs`.
"""
from __future__ import annotations

import gymnasium as gym

__all__ = ["create_cartpole_deterministic", "create_pendulum_deterministic"]


def create_cartpole_deterministic(config: dict) -> gym.Env:
    """CartPole-v1, reset once with the env config's `seed` (default 0)."""
    env = gym.make("CartPole-v1")
    env.reset(seed=config.get("seed", 0))
    return env


def create_pendulum_deterministic(config: dict) -> gym.Env:
    """Pendulum-v1, reset once with the env config's `seed` (default 0)."""
    env = gym.make("Pendulum-v1")
    env.reset(seed=config.get("seed", 0))
    return env
