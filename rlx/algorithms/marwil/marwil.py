"""MARWIL (Monotonic Advantage Re-Weighted Imitation Learning): its config and training step.

MARWIL imitates the actions of its input (usually offline data, `config.offline_data(input_=...)`),
weighting each by exp(beta * advantage / c), where c^2 is a moving average of the squared
advantages; beta=0 is behavior cloning (rlx.algorithms.bc). It trains a value function too,
whose error is the advantage. Evaluate it on the env with `evaluation_interval`.
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.on_policy import OnPolicyAlgorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, integer, number
from rlx.utils.errors import ConfigError

T = ("training",)


class MARWILConfig(AlgorithmConfig):
    """Config of MARWIL (RLlib's defaults).

    Example:
        >>> config = (MARWILConfig().environment("CartPole-v1")
        ...           .offline_data(input_="/tmp/cartpole-out")
        ...           .evaluation(evaluation_interval=1))
        >>> algo = config.build()  # doctest: +SKIP
    """

    _extra_options = [
        Option("beta", 1.0, T, number(0.0, 1.0),
               doc="Advantage scale in the exponential action weights; 0.0 is behavior cloning."),
        Option("bc_logstd_coeff", 0.0, T, number(0.0),
               doc="Box actions: weight of the policy's log std added to the imitated log-likelihood "
                   "(keeps the action distribution wide)."),
        Option("moving_average_sqd_adv_norm_update_rate", 1e-8, T, number(0.0, 1.0),
               doc="Update rate of the moving average of squared advantages (c^2) that scales advantages."),
        Option("moving_average_sqd_adv_norm_start", 100.0, T, number(0.0, exclusive_min=True),
               doc="Starting value of the moving average of squared advantages (c^2)."),
        Option("vf_coeff", 1.0, T, number(0.0), doc="Weight of the value-function loss in the total loss."),
        Option("lambda_", 1.0, T, number(0.0, 1.0), aliases=("lambda",),
               doc="GAE lambda of the value targets (1.0: discounted returns, bootstrapped where an episode is cut)."),
        Option("burnin_len", 0, T, integer(0),
               doc="Recurrent models: initial steps of each sequence left out of the loss.",
               later="recurrent (stateful) models in MARWIL"),
    ]
    _default_overrides = {
        "lr": 1e-4,
        "train_batch_size": 2000,
        "postprocess_inputs": True,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or MARWIL)

    def _validate_algorithm_settings(self) -> None:
        super()._validate_algorithm_settings()
        v = self._values
        if v["beta"] > 0.0 and not v["postprocess_inputs"]:
            raise ConfigError(
                "`postprocess_inputs` must be True for MARWIL (to calculate accum., discounted returns)! Try setting "
                "`config.offline_data(postprocess_inputs=True)`.")


class MARWIL(OnPolicyAlgorithm):
    """MARWIL: advantage-weighted imitation of the input's actions, plus a value function."""

    _config_class = MARWILConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        from rlx.algorithms.marwil.marwil_learner import MARWILLearner

        return MARWILLearner

    def training_step(self) -> dict[str, Any]:
        """Read (or sample) a train batch, take one gradient step on it, and push the new weights."""
        return self.sample_and_learn()


# Old names (Trainer era).
MARWILTrainer = MARWIL

DEFAULT_CONFIG = MARWILConfig().to_dict()
