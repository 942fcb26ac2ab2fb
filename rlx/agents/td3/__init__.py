"""Old import path of TD3: `import rlx.agents.td3 as td3; td3.TD3Trainer(config=td3.DEFAULT_CONFIG)`."""
from rlx.algorithms.td3.td3 import DEFAULT_CONFIG, TD3, TD3Config, TD3Trainer

__all__ = ["TD3", "TD3Config", "TD3Trainer", "DEFAULT_CONFIG"]
