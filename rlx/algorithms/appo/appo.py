"""APPO (asynchronous PPO, IMPACT): its config (options and defaults); the training step is IMPALA's."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.algorithms.appo.appo_learner import APPOLearner
from rlx.algorithms.config_options import Option, boolean, count, integer, number
from rlx.algorithms.impala.impala import IMPALA, IMPALAConfig
from rlx.algorithms.impala.learner_queue import LearnerQueue
from rlx.utils.errors import ConfigError

T = ("training",)


def _critic_on(name: str, value: Any) -> bool:
    value = boolean(name, value)
    if not value:
        raise ConfigError("APPO always uses a value function (use_critic=False was removed from RLlib's APPO too); "
                          "remove use_critic.")
    return value


class APPOConfig(IMPALAConfig):
    """Config of APPO: IMPALA's asynchronous sampling with IMPACT's loss (Luo et al., 2020).

    The learner queue is a circular buffer of `circular_buffer_num_batches` train batches, each
    trained on up to `circular_buffer_iterations_per_batch` times (or, with
    use_circular_buffer=False, a FIFO queue of `simple_queue_size` batches used once).

    Example:
        >>> config = APPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("vtrace", True, T, boolean,
               doc="V-trace advantages and value targets; False uses PPO's GAE (use_gae, lambda_) instead."),
        Option("use_critic", True, T, _critic_on, doc="APPO always uses a value function (True only)."),
        Option("use_gae", True, T, boolean, doc="With vtrace=False: GAE (else discounted returns minus V)."),
        Option("lambda_", 1.0, T, number(0.0, 1.0), aliases=("lambda",), doc="GAE lambda (vtrace=False)."),
        Option("clip_param", 0.4, T, number(0.0, exclusive_min=True), doc="PPO's surrogate clipping."),
        Option("use_kl_loss", False, T, boolean, doc="Add the adaptive KL(target policy || policy) penalty."),
        Option("kl_coeff", 1.0, T, number(0.0), doc="Initial KL penalty coefficient."),
        Option("kl_target", 0.01, T, number(0.0), doc="Target KL for the adaptive coefficient."),
        Option("target_network_update_freq", 2, T, integer(1), aliases=("target_update_frequency",),
               doc="Target network updates come every this many units of circular_buffer_num_batches * "
                   "circular_buffer_iterations_per_batch learner updates (one update per unit without the "
                   "circular buffer)."),
        Option("tau", 1.0, T, number(0.0, 1.0, exclusive_min=True),
               doc="Target-network update rate: target <- tau * online + (1 - tau) * target."),
        Option("target_worker_clipping", 2.0, T, number(0.0, exclusive_min=True),
               doc="Clip of the importance ratio behaviour / target policy in the surrogate."),
        Option("use_circular_buffer", True, T, boolean,
               doc="Keep train batches in a circular buffer (reused, picked at random) instead of a FIFO queue."),
        Option("circular_buffer_num_batches", 8, T, integer(1), doc="Train batches the circular buffer holds (N)."),
        Option("circular_buffer_iterations_per_batch", 2, T, count(1),
               doc="Times each batch of the circular buffer is trained on at most (K)."),
        Option("simple_queue_size", 32, T, integer(1),
               doc="Train batches the FIFO queue holds (use_circular_buffer=False)."),
    ]
    _default_overrides = {
        "lr": 0.0005,
        "learner_queue_size": 16,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or APPO)

    def _validate_algorithm_settings(self) -> None:
        super()._validate_algorithm_settings()
        if self.is_user_set("learner_queue_size"):
            raise ConfigError("APPO's learner queue is its circular buffer: set circular_buffer_num_batches (or, with "
                              "use_circular_buffer=False, simple_queue_size) instead of learner_queue_size.")


class APPO(IMPALA):
    """Asynchronous Proximal Policy Optimization: IMPALA's training step with APPO's learner and a
    circular buffer as the learner queue."""

    _config_class = APPOConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]

        return APPOLearner

    def make_learner_queue(self) -> LearnerQueue:
        """The circular buffer (N batches used up to K times each, picked at random), or a FIFO
        queue of simple_queue_size batches."""
        cfg = self.config
        if not cfg.use_circular_buffer:
            return LearnerQueue(cfg.simple_queue_size)
        rng = np.random.default_rng(None if cfg.seed is None else int(cfg.seed) + 23)
        return LearnerQueue(cfg.circular_buffer_num_batches, cfg.circular_buffer_iterations_per_batch, rng)


# Old names (Trainer era).
APPOTrainer = APPO

DEFAULT_CONFIG = APPOConfig().to_dict()
