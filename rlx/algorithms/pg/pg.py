"""PG (vanilla policy gradient, REINFORCE): its config (options and defaults) and its training step."""
from __future__ import annotations

from typing import Any, ClassVar

from rlx.algorithms.on_policy import OnPolicyAlgorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.utils.errors import ConfigError


class PGConfig(AlgorithmConfig):
    """Config of PG: REINFORCE on the discounted returns of complete episodes, no baseline.

    Its defaults are RLlib's (lr 0.0004, train_batch_size 200), except that the runners sample
    whole episodes (batch_mode='complete_episodes'): a return cut at the end of a batch has no
    value function to estimate the rest.

    Example:
        >>> config = PGConfig().environment("CartPole-v1").training(lr=0.01)
        >>> algo = config.build()
    """

    _default_overrides = {
        "lr": 0.0004,
        "train_batch_size": 200,
        "batch_mode": "complete_episodes",
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or PG)

    def _validate_algorithm_settings(self) -> None:
        if self._values["batch_mode"] == "truncate_episodes" and not self._values["in_evaluation"]:
            raise ConfigError(
                "PG has no value function to estimate the return after a batch cuts an episode "
                "(batch_mode='truncate_episodes'); use batch_mode='complete_episodes' (PG's default), or A2C.")


class PG(OnPolicyAlgorithm):
    """Vanilla policy gradient: sample a train batch, take one gradient step, push the weights."""

    _config_class: ClassVar[type[AlgorithmConfig]] = PGConfig  # subclasses bring their own config class

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        from rlx.algorithms.pg.pg_learner import PGLearner

        return PGLearner

    def training_step(self) -> dict[str, Any]:
        """Sample `train_batch_size` env steps, update on them, and push the new weights."""
        return self.sample_and_learn()


# Old names (Trainer era).
PGTrainer = PG

DEFAULT_CONFIG = PGConfig().to_dict()
