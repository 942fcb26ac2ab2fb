"""BC (behavior cloning): MARWIL with beta = 0, imitating the input's actions as they are."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.marwil.marwil import MARWIL, MARWILConfig
from rlx.utils.errors import ConfigError


class BCConfig(MARWILConfig):
    """Config of BC: MARWILConfig with beta=0.0 (required) and postprocess_inputs=False.

    Example:
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .offline_data(input_="/tmp/cartpole-out")
        ...           .evaluation(evaluation_interval=1))
        >>> algo = config.build()  # doctest: +SKIP
    """

    _default_overrides = {
        "beta": 0.0,
        "postprocess_inputs": False,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or BC)

    def _validate_algorithm_settings(self) -> None:
        if self._values["beta"] != 0.0:
            raise ConfigError("For behavioral cloning, `beta` parameter must be 0.0! Use MARWIL (MARWILConfig) for "
                              "beta > 0.")
        super()._validate_algorithm_settings()


class BC(MARWIL):
    """Behavior cloning: maximizes the log-likelihood of the input's actions (MARWIL, beta=0)."""

    _config_class = BCConfig


# Old names (Trainer era).
BCTrainer = BC

DEFAULT_CONFIG = BCConfig().to_dict()
