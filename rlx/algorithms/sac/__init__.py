"""Soft Actor-Critic."""
from rlx.algorithms.sac.sac import DEFAULT_CONFIG, SAC, SACConfig, SACTrainer

__all__ = ["SAC", "SACConfig", "SACTrainer", "DEFAULT_CONFIG"]
