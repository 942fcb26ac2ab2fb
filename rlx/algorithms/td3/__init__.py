"""Twin Delayed DDPG (TD3)."""
from rlx.algorithms.td3.td3 import DEFAULT_CONFIG, TD3, TD3Config, TD3Trainer

__all__ = ["TD3", "TD3Config", "TD3Trainer", "DEFAULT_CONFIG"]
