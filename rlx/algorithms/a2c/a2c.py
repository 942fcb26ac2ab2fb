"""A2C (synchronous advantage actor-critic): its config (options and defaults); the training step is PG's."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.config_options import Option, boolean, integer, number, schedule_or_number
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.pg.pg import PG
from rlx.utils.errors import ConfigError

T = ("training",)


class A2CConfig(AlgorithmConfig):
    """Config of A2C. Defaults are RLlib's (lr 0.0001, entropy_coeff 0.01, grad_clip 40, lambda 1.0,
    min_time_s_per_iteration 10), with rlx's one-process default of num_env_runners=0.

    Example:
        >>> config = A2CConfig().environment("CartPole-v1").training(lr=0.001, microbatch_size=100)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("use_critic", True, T, boolean, doc="Use a value function baseline."),
        Option("use_gae", True, T, boolean, doc="Generalized advantage estimation (needs use_critic)."),
        Option("lambda_", 1.0, T, number(0.0, 1.0), aliases=("lambda",), doc="GAE lambda."),
        Option("vf_loss_coeff", 0.5, T, number(0.0), doc="Weight of the value-function loss."),
        Option("entropy_coeff", 0.01, T, schedule_or_number(0.0), aliases=("entropy_coeff_schedule",),
               doc="Entropy bonus: a float or a schedule [[timestep, value], ...]."),
        Option("microbatch_size", None, T, integer(1, allow_none=True),
               doc="Accumulate the train batch's gradient over microbatches of this many env steps before the one "
                   "optimizer step (less memory, the same update); None: the whole batch at once."),
    ]
    _default_overrides = {
        "lr": 0.0001,
        "grad_clip": 40.0,
        "min_time_s_per_iteration": 10,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or A2C)

    def _validate_algorithm_settings(self) -> None:
        v = self._values
        if v["use_gae"] and not v["use_critic"]:
            raise ConfigError("use_gae=True needs use_critic=True (GAE uses the value function); set use_gae=False.")
        if not v["use_critic"] and v["batch_mode"] == "truncate_episodes" and not v["in_evaluation"]:
            raise ConfigError(
                "use_critic=False cannot estimate the return after a batch cuts an episode "
                "(batch_mode='truncate_episodes'); set env_runners(batch_mode='complete_episodes')."
            )


class A2C(PG):
    """Synchronous advantage actor-critic: PG's training step with A2C's learner."""

    _config_class = A2CConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        from rlx.algorithms.a2c.a2c_learner import A2CLearner

        return A2CLearner


# Old names (Trainer era).
A2CTrainer = A2C

DEFAULT_CONFIG = A2CConfig().to_dict()
