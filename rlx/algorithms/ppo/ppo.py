"""PPO: its config (options and defaults) and its training step."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.on_policy import OnPolicyAlgorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, count, integer, number, schedule_or_number
from rlx.utils.errors import ConfigError

T = ("training",)

#: RLlib's default minibatch_size. rlx's faster default (512) is tuned together with rlx's default
#: lr (3e-3); it falls back to RLlib's 128 when the user's train batch is too small for 512 or when
#: the user sets their own lr (a learning rate tuned on RLlib, with RLlib's minibatch size: at 512
#: it would take a quarter of the gradient steps and learn several times slower).
RLLIB_DEFAULT_MINIBATCH_SIZE = 128

#: PPO's learner result keys, under RLlib's names (`ray.rllib.algorithms.ppo.ppo`).
LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY = "vf_loss_unclipped"
LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY = "vf_explained_var"
LEARNER_RESULTS_KL_KEY = "mean_kl_loss"
LEARNER_RESULTS_CURR_KL_COEFF_KEY = "curr_kl_coeff"
LEARNER_RESULTS_CURR_ENTROPY_COEFF_KEY = "curr_entropy_coeff"


class PPOConfig(AlgorithmConfig):
    """Config of PPO. Defaults learn classic-control tasks without tuning.

    Example:
        >>> config = PPOConfig().environment("CartPole-v1").training(lr=3e-4, num_epochs=10)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("use_critic", True, T, boolean, doc="Use a value function baseline."),
        Option("use_gae", True, T, boolean, doc="Generalized advantage estimation (needs use_critic)."),
        Option("lambda_", 0.95, T, number(0.0, 1.0), aliases=("lambda",), doc="GAE lambda."),
        Option("use_kl_loss", True, T, boolean, doc="Add the adaptive KL penalty to the loss."),
        Option("kl_coeff", 0.2, T, number(0.0), doc="Initial KL penalty coefficient."),
        Option("kl_target", 0.01, T, number(0.0), doc="Target KL for the adaptive coefficient."),
        Option("minibatch_size", 512, T, integer(1, allow_none=True), aliases=("sgd_minibatch_size", "mini_batch_size_per_learner"),
               doc="SGD minibatch size; None: the whole train batch is one minibatch (as RLlib's Learner)."),
        Option("num_epochs", 8, T, count(1), aliases=("num_sgd_iter",), doc="Passes over each train batch."),
        Option("shuffle_batch_per_epoch", True, T, boolean, aliases=("shuffle_sequences",)),
        Option("vf_loss_coeff", 0.5, T, number(0.0)),
        Option("entropy_coeff", 0.0, T, schedule_or_number(0.0), aliases=("entropy_coeff_schedule",),
               doc="Entropy bonus: a float or a schedule [[timestep, value], ...]."),
        Option("clip_param", 0.2, T, number(0.0, exclusive_min=True)),
        Option("vf_clip_param", None, T, number(0.0, exclusive_min=True, allow_none=True),
               doc="Clip the squared value error at this value (None: no clipping). It is sensitive to the "
                   "reward scale: an error above it gives no value gradient."),
    ]
    _default_overrides = {
        "lr": 3e-3,
        "num_envs_per_env_runner": 8,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or PPO)

    def _adapt_unset_defaults(self) -> None:
        super()._adapt_unset_defaults()
        if not self.is_user_set("minibatch_size"):
            default = self._table.options["minibatch_size"].default
            batch = self.total_train_batch_size
            if batch >= default and not self.is_user_set("lr"):
                self._values["minibatch_size"] = default
            else:
                self._values["minibatch_size"] = min(RLLIB_DEFAULT_MINIBATCH_SIZE, batch)
        elif self._values["minibatch_size"] is None:
            # As RLlib's Learner: no minibatch size means one minibatch of the whole train batch.
            self._values["minibatch_size"] = self.total_train_batch_size

    def _validate_algorithm_settings(self) -> None:
        v = self._values
        if v["use_gae"] and not v["use_critic"]:
            raise ConfigError("use_gae=True needs use_critic=True (GAE uses the value function); set use_gae=False.")
        if not v["use_critic"] and v["batch_mode"] == "truncate_episodes" and not v["in_evaluation"]:
            raise ConfigError(
                "use_critic=False cannot estimate the return after a batch cuts an episode "
                "(batch_mode='truncate_episodes'); set env_runners(batch_mode='complete_episodes')."
            )
        if v["minibatch_size"] > self.total_train_batch_size:
            raise ConfigError(
                f"minibatch_size ({v['minibatch_size']}) is larger than the train batch "
                f"({self.total_train_batch_size}); lower minibatch_size or raise train_batch_size "
                "(leave minibatch_size unset and it adapts to the train batch)."
            )


class PPO(OnPolicyAlgorithm):
    """Proximal Policy Optimization (clipped surrogate, GAE, adaptive KL penalty)."""

    _config_class = PPOConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        from rlx.algorithms.ppo.ppo_learner import PPOLearner

        return PPOLearner

    def training_step(self) -> dict[str, Any]:
        """Sample a train batch, run PPO's update on it, and push the new weights."""
        return self.sample_and_learn()


# Old names (Trainer era).
PPOTrainer = PPO


DEFAULT_CONFIG = PPOConfig().to_dict()
