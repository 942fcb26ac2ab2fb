"""Old import path of the config builder (`ray.rllib.agents.trainer_config`): `TrainerConfig`
is `rlx.algorithms.algorithm_config.AlgorithmConfig` under its Trainer-era name."""
from rlx.algorithms.algorithm_config import AlgorithmConfig

__all__ = ["TrainerConfig"]

#: The Trainer-era name of AlgorithmConfig.
TrainerConfig = AlgorithmConfig
