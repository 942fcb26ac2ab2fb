"""Twin Delayed DDPG (TD3): DDPG's config and algorithm with TD3's defaults."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.ddpg.ddpg import DDPG, DDPGConfig


class TD3Config(DDPGConfig):
    """Config of TD3 (Fujimoto et al., 2018): DDPG with twin critics, a delayed actor and target smoothing.

    Defaults follow RLlib's except: networks of [256, 256] (RLlib: [400, 300]) and 1000
    (RLlib: 10000) uniformly random steps (`random_timesteps` of the GaussianNoise
    exploration) and steps before learning starts, so that learning starts early enough for
    Pendulum-v1 to reach a mean return of -250 well within 30k env steps.

    Example:
        >>> config = TD3Config().environment("Pendulum-v1")
        >>> algo = config.build()
    """

    _default_overrides = {
        "twin_q": True,
        "policy_delay": 2,
        "smooth_target_policy": True,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        "tau": 0.005,
        "train_batch_size": 100,
        "num_steps_sampled_before_learning_starts": 1000,
        "exploration_config": {"type": "GaussianNoise", "random_timesteps": 1000, "stddev": 0.1,
                               "initial_scale": 1.0, "final_scale": 1.0, "scale_timesteps": 1},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or TD3)


class TD3(DDPG):
    """Twin Delayed Deep Deterministic policy gradient: DDPG with clipped double Q, delayed policy
    updates and target policy smoothing (its config's defaults)."""

    _config_class = TD3Config


# Old names (Trainer era).
TD3Trainer = TD3
DEFAULT_CONFIG = TD3Config().to_dict()
