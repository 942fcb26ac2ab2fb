"""APEX-DQN: DQN with Ape-X's distributed prioritized replay (Horgan et al., 2018).

The training step lives in rlx.algorithms.apex_common (shared with APEX-DDPG); the loss is
DQN's (rlx.algorithms.dqn.dqn_learner).
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.apex_common import ApexConfig, ApexMixin
from rlx.algorithms.dqn.dqn import DQN, DQNConfig


class ApexDQNConfig(ApexConfig, DQNConfig):
    """Config of APEX-DQN: DQNConfig with Ape-X's options and RLlib's Ape-X defaults (32 remote
    EnvRunners, 3-step returns, prioritized replay of 2M steps, per-worker epsilon-greedy,
    `training_intensity=1`, train batches of 512).

    Example:
        >>> config = ApexDQNConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
        >>> algo = config.build()
    """

    _default_overrides = {
        "exploration_config": {"type": "PerWorkerEpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.01,
                               "epsilon_timesteps": 5000},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or ApexDQN)


class ApexDQN(ApexMixin, DQN):
    """DQN trained Ape-X style: runners sample asynchronously into a prioritized buffer while a
    learner thread updates (see rlx.algorithms.apex_common)."""

    _config_class = ApexDQNConfig


# Old names (Trainer era).
ApexTrainer = ApexDQN
APEX_DEFAULT_CONFIG = ApexDQNConfig().to_dict()
