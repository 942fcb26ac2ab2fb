"""DQN and its Rainbow options: config (options and defaults) and algorithm."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_bounds import check_rows
from rlx.algorithms.config_options import Option, boolean, choice, integer, number, validate_schedule
from rlx.algorithms.dqn.dqn_learner import DQNLearner
from rlx.algorithms.dqn.dqn_rl_module import DQNRLModule
from rlx.algorithms.dqn.recurrent_dqn import fold_sequence_replay_settings
from rlx.algorithms.dqn.recurrent_dqn_learner import RecurrentDQNLearner
from rlx.algorithms.dqn.recurrent_dqn_rl_module import RecurrentDQNRLModule
from rlx.algorithms.off_policy import OffPolicyAlgorithm, OffPolicyConfig
from rlx.algorithms.recurrent_replay import sequence_replay_options, setup_sequence_replay
from rlx.core.rl_module.rl_module import RLModuleSpec
from rlx.utils.errors import ConfigError

T = ("training",)


def _hiddens(name: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(h, int) and h > 0 for h in value):
        raise ConfigError(f"'{name}' must be a list of positive layer sizes, e.g. [256]; got {value!r}.")
    return list(value)


def _epsilon(name: str, value: Any) -> Any:
    if value is None:
        return None
    return validate_schedule(name, value)


class DQNConfig(OffPolicyConfig):
    """Config of DQN (with double Q, dueling, n-step, distributional, noisy nets and prioritized replay).

    Example:
        >>> config = DQNConfig().environment("CartPole-v1").training(n_step=3, double_q=True)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("double_q", True, T, boolean, doc="Pick next actions with the online net, value them with the target net."),
        Option("dueling", True, T, boolean, doc="Separate value and advantage streams."),
        Option("hiddens", [64], T, _hiddens, doc="Layer sizes of the Q head(s) (ReLU) after the model's encoder."),
        Option("num_atoms", 1, T, integer(1), doc="Atoms of the return distribution (>1: distributional C51)."),
        Option("v_min", -10.0, T, number(), doc="Smallest atom of the return distribution."),
        Option("v_max", 10.0, T, number(), doc="Largest atom of the return distribution."),
        Option("noisy", False, T, boolean, doc="NoisyNet layers in the Q head(s)."),
        Option("sigma0", 0.5, T, number(0.0), doc="Initial noise scale of the noisy layers."),
        Option("td_error_loss_fn", "huber", T, choice("huber", "mse"), doc="Loss on TD errors."),
        Option("categorical_distribution_temperature", 1.0, T, number(0.0, exclusive_min=True),
               doc="Temperature of the Categorical distribution over Q-values (SoftQ-style sampling)."),
        Option("epsilon", None, T, _epsilon,
               doc="Epsilon schedule [[timestep, epsilon], ...]; sets the EpsilonGreedy exploration's schedule."),
        Option("adam_epsilon", 1e-8, T, number(0.0, exclusive_min=True), doc="Adam's epsilon."),
        Option("before_learn_on_batch", None, T, lambda n, v: v,
               doc="Callable(batch, policies, train_batch_size) -> batch applied to each replayed batch."),
        *sequence_replay_options("DQN"),
    ]
    # rlx's defaults learn CartPole-v1 (mean return 450 over 100 episodes) in 60k-80k env steps;
    # they differ from RLlib's (lr 5e-4, batch 32, n_step 1, [256] layers) in the ways that
    # measured faster and steadier there: docs/algorithms/dqn.md has the figures.
    _default_overrides = {
        "lr": 1e-3,
        "train_batch_size": 64,
        "gamma": 0.99,
        "grad_clip": 40.0,
        "rollout_fragment_length": 4,
        "n_step": 3,
        "target_network_update_freq": 500,
        "tau": 1.0,
        "num_steps_sampled_before_learning_starts": 1000,
        "exploration_config": {"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.01,
                               "epsilon_timesteps": 5000},
        "model": {"fcnet_hiddens": [64], "fcnet_activation": "tanh"},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or DQN)

    def validate(self) -> None:
        """Check settings and fold `epsilon` and `adam_epsilon` into exploration and optimizer settings."""
        v = self._values
        if v["epsilon"] is not None:
            exp = dict(v["exploration_config"])
            if exp.get("type", "StochasticSampling") not in ("EpsilonGreedy", "PerWorkerEpsilonGreedy"):
                raise ConfigError(
                    f"'epsilon' sets an EpsilonGreedy schedule, but exploration_config type is {exp.get('type')!r}; "
                    "drop one of them."
                )
            exp["epsilon_schedule"] = v["epsilon"]
            v["exploration_config"] = exp
        if v["adam_epsilon"] != 1e-8 and "eps" not in v["optimizer"]:
            v["optimizer"] = {**v["optimizer"], "eps": v["adam_epsilon"]}
        fold_sequence_replay_settings(v)
        super().validate()

    def _validate_algorithm_settings(self) -> None:
        super()._validate_algorithm_settings()
        v = self._values
        if v["v_min"] >= v["v_max"]:
            raise ConfigError(f"DQN needs v_min < v_max (the range of the return distribution's atoms), "
                              f"got v_min={v['v_min']}, v_max={v['v_max']}.")
        # The Q head has num_atoms outputs per action, each a row of weights.
        check_rows("num_atoms", int(v["num_atoms"]), "Q-head outputs per action")
        if v["before_learn_on_batch"] is not None and not callable(v["before_learn_on_batch"]):
            raise ConfigError("'before_learn_on_batch' must be a callable(batch, policies, train_batch_size).")


class DQN(OffPolicyAlgorithm):
    """Deep Q-Network with the Rainbow extensions (Hessel et al., 2018) as options."""

    _config_class = DQNConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        if self.config.model.get("use_lstm"):
            return RecurrentDQNLearner
        return DQNLearner

    def setup(self, config: AlgorithmConfig) -> None:
        """OffPolicyAlgorithm's setup; a recurrent module (use_lstm) replays sequences instead."""
        setup_sequence_replay(self, config, "DQN", super().setup)

    def get_default_rl_module_spec(self) -> Any:
        """DQN's Q-network, with the Rainbow options folded into its model config (with use_lstm:
        the recurrent Q-network)."""
        cfg = self.config
        model = {
            **cfg.model,
            "hiddens": list(cfg.hiddens),
            "dueling": cfg.dueling,
            "num_atoms": cfg.num_atoms,
            "v_min": cfg.v_min,
            "v_max": cfg.v_max,
            "noisy": cfg.noisy,
            "sigma0": cfg.sigma0,
            "categorical_distribution_temperature": cfg.categorical_distribution_temperature,
        }
        if cfg.model.get("use_lstm") and not cfg.model.get("custom_model"):
            return RLModuleSpec(module_class=RecurrentDQNRLModule, model_config=model)
        return RLModuleSpec(module_class=DQNRLModule, model_config=model)

    def _replay_hook(self, batch: dict) -> dict:
        hook = self.config.before_learn_on_batch
        if hook is None:
            return batch
        out = hook(batch, {"default_policy": self.get_policy()}, self.config.total_train_batch_size)
        return batch if out is None else out


# Old names (Trainer era).
DQNTrainer = DQN
DEFAULT_CONFIG = DQNConfig().to_dict()
