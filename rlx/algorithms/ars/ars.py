"""ARS (augmented random search, Mania et al. 2018): its config (options and defaults); the training
step is ES's (rlx/algorithms/es) with ARS's perturbation budget and learner."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.ars.ars_learner import ARSLearner
from rlx.algorithms.config_options import Option, choice, count, number
from rlx.algorithms.es.es import ES, evolution_options
from rlx.utils.errors import ConfigError

T = ("training",)


class ARSConfig(AlgorithmConfig):
    """Config of ARS: `num_rollouts` antithetic perturbations per step, evaluated by the EnvRunners;
    the `rollouts_used` best directions make an SGD step scaled by their returns' std. The policy
    is linear by default (`policy_type="LinearPolicy"`: model fcnet_hiddens=[]), with a
    MeanStdFilter on the observations.

    Defaults are RLlib's (num_rollouts 32, rollouts_used 32, sgd_stepsize 0.01, noise_stdev 0.02,
    action_noise_std 0.0, offset 0), except noise_size (25M entries) and rlx's one-process
    default num_env_runners=0.

    Example:
        >>> config = ARSConfig().environment("CartPole-v1").training(num_rollouts=16, rollouts_used=8)
        >>> algo = config.build()
    """

    _extra_options = evolution_options(action_noise_std=0.0) + [
        Option("num_rollouts", 32, T, count(1), doc="Perturbation directions (episode pairs) per update."),
        Option("rollouts_used", 32, T, count(1),
               doc="How many of the best directions (by max(r+, r-)) the update uses; at most num_rollouts."),
        Option("sgd_stepsize", 0.01, T, number(0.0, exclusive_min=True), doc="Step size of the SGD update."),
        Option("offset", 0.0, T, number(), doc="Subtracted from every step's reward in the update's returns "
                                               "(e.g. a survival bonus, as in the ARS paper)."),
        Option("policy_type", "LinearPolicy", T, choice("LinearPolicy", "MLPPolicy"),
               doc="'LinearPolicy' (model fcnet_hiddens must be []) or 'MLPPolicy' (the model's MLP)."),
    ]
    _default_overrides = {
        "observation_filter": "MeanStdFilter",
        "explore": False,
        "model": {"fcnet_hiddens": []},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or ARS)

    def _validate_algorithm_settings(self) -> None:
        v = self._values
        if v["rollouts_used"] > v["num_rollouts"]:
            raise ConfigError(f"rollouts_used ({v['rollouts_used']}) is larger than num_rollouts "
                              f"({v['num_rollouts']}); the update keeps the best rollouts_used of num_rollouts "
                              "directions, so lower rollouts_used or raise num_rollouts.")
        if v["policy_type"] == "LinearPolicy" and (v["model"] or {}).get("fcnet_hiddens"):
            raise ConfigError(f"policy_type='LinearPolicy' needs model fcnet_hiddens=[] (got "
                              f"{v['model']['fcnet_hiddens']}); set policy_type='MLPPolicy' for hidden layers.")


class ARS(ES):
    """Augmented random search: ES's training step (perturbations evaluated on the EnvRunners,
    rlx/algorithms/es/perturbations.py) with `num_rollouts` directions per step and ARS's update
    (rlx/algorithms/ars/ars_learner.py)."""

    _config_class = ARSConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]

        return ARSLearner

    def perturbation_budget(self) -> tuple[int, int]:
        """(num_rollouts perturbations, no env-step minimum)."""
        return int(self.config.num_rollouts), 0

    def reward_offset(self) -> float:
        """config.offset, subtracted from every step's reward."""
        return float(self.config.offset)


# Old names (Trainer era).
ARSTrainer = ARS

DEFAULT_CONFIG = ARSConfig().to_dict()
