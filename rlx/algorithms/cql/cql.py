"""CQL (Conservative Q-Learning, Kumar et al., 2020): config and algorithm.

CQL is SAC trained from offline data (`config.offline_data(input_=...)`) whose critics are
pushed down on actions the data does not take and up on the ones it does (the penalty in
rlx.algorithms.cql.cql_learner), so the policy does not exploit Q-values the data never
checked. The first `bc_iters` updates train the policy by behaviour cloning. Batches read
from the input go into the replay buffer and train batches are replayed from it, as in SAC;
`training_intensity` (replayed steps per read step, default 1.0) sets how often.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_bounds import rows_option
from rlx.algorithms.config_options import Option, boolean, integer, number
from rlx.algorithms.cql.cql_learner import CQLLearner
from rlx.algorithms.sac.sac import SAC, SACConfig
from rlx.utils.errors import NotSupportedYetError

T = ("training",)


class CQLConfig(SACConfig):
    """Config of CQL (RLlib's defaults), for Box action spaces.

    Example:
        >>> config = (CQLConfig().environment("Pendulum-v1")
        ...           .offline_data(input_="/tmp/pendulum-out", actions_in_input_normalized=True)
        ...           .training(bc_iters=200, min_q_weight=5.0)
        ...           .evaluation(evaluation_interval=1))
        >>> algo = config.build()  # doctest: +SKIP
    """

    _extra_options = [
        Option("bc_iters", 20000, T, integer(0),
               doc="Updates at the start whose policy loss is behaviour cloning (the data's log-likelihood) instead "
                   "of SAC's."),
        Option("temperature", 1.0, T, number(0.0, exclusive_min=True),
               doc="Temperature of the logsumexp over sampled actions' Q-values in the CQL penalty."),
        Option("num_actions", 10, T, rows_option(1, "sampled actions per state"),
               doc="Actions sampled per state (uniformly, from the policy at s, from the policy at s') for the "
                   "CQL penalty."),
        Option("lagrangian", False, T, boolean,
               doc="Tune the penalty's weight (alpha') so the gap between sampled and data Q-values stays near "
                   "lagrangian_thresh."),
        Option("lagrangian_thresh", 5.0, T, number(),
               doc="With lagrangian: the target of the penalty's gap (tau in the paper)."),
        Option("min_q_weight", 5.0, T, number(0.0), doc="Weight of the CQL penalty in the critic loss."),
        Option("deterministic_backup", True, T, boolean,
               doc="Bellman targets without SAC's entropy bonus: r + gamma * min_i Q'_i(s', a' ~ pi)."),
    ]
    _default_overrides = {
        "lr": 3e-4,
        "actor_lr": 1e-4,
        "critic_lr": 1e-3,
        "alpha_lr": 1e-3,
        "training_intensity": 1.0,
        "num_steps_sampled_before_learning_starts": 0,
        "min_sample_timesteps_per_iteration": 0,
        "min_train_timesteps_per_iteration": 100,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or CQL)


class CQL(SAC):
    """Conservative Q-Learning on SAC's networks and replay training step."""

    _config_class = CQLConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]

        return CQLLearner

    def setup(self, config: AlgorithmConfig) -> None:
        """SAC's setup, for one policy with Box actions."""
        super().setup(config)
        error = None
        if self.learners.sole_module_id is None:  # a multi-agent run's container of several Learners
            error = NotSupportedYetError("CQL with several policies", fix="Train one policy (no multi_agent()).")
        elif not isinstance(self.env_runner.action_space, gym.spaces.Box):
            error = NotSupportedYetError(f"CQL with the action space {self.env_runner.action_space}",
                                         "CQL's penalty samples continuous actions, as RLlib's CQL does",
                                         fix="Use an env with Box actions, or BC/MARWIL/DQN for Discrete ones.")
        if error is not None:
            self.stop()  # release the runners and learner setup created
            raise error


CQLTrainer = CQL
DEFAULT_CONFIG = CQLConfig().to_dict()
CQL_DEFAULT_CONFIG = DEFAULT_CONFIG
