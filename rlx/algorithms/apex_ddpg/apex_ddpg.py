"""APEX-DDPG: DDPG with Ape-X's distributed prioritized replay (Horgan et al., 2018).

The training step lives in rlx.algorithms.apex_common (shared with APEX-DQN); the loss is
DDPG's (rlx.algorithms.ddpg.ddpg_learner).
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.apex_common import ApexConfig, ApexMixin
from rlx.algorithms.ddpg.ddpg import DDPG, DDPGConfig


class ApexDDPGConfig(ApexConfig, DDPGConfig):
    """Config of APEX-DDPG: DDPGConfig with Ape-X's options and RLlib's Ape-X defaults (32 remote
    EnvRunners, 3-step returns, prioritized replay of 2M steps, per-worker Gaussian noise,
    `training_intensity=1`, train batches of 512).

    Example:
        >>> config = ApexDDPGConfig().environment("Pendulum-v1").env_runners(num_env_runners=2)
        >>> algo = config.build()
    """

    _default_overrides = {
        # Remote runner i of N: noise scale 0.4 ** (1 + 7 * (i - 1) / (N - 1)) times stddev; without
        # remote runners, GaussianNoise's annealed scale.
        "exploration_config": {"type": "PerWorkerGaussianNoise"},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or ApexDDPG)


class ApexDDPG(ApexMixin, DDPG):
    """DDPG trained Ape-X style: runners sample asynchronously into a prioritized buffer while a
    learner thread updates (see rlx.algorithms.apex_common)."""

    _config_class = ApexDDPGConfig


# Old names (Trainer era).
ApexDDPGTrainer = ApexDDPG
APEX_DDPG_DEFAULT_CONFIG = ApexDDPGConfig().to_dict()
