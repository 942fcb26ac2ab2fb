"""Soft Actor-Critic: config (options and defaults) and algorithm."""
from __future__ import annotations

import numbers
from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, dictionary, number, schedule_or_number
from rlx.algorithms.off_policy import OffPolicyAlgorithm, OffPolicyConfig
from rlx.algorithms.recurrent_replay import (fold_sequence_replay_settings, sequence_replay_options,
                                             setup_sequence_replay)
from rlx.algorithms.sac.recurrent_sac_learner import RecurrentSACLearner
from rlx.algorithms.sac.recurrent_sac_rl_module import RecurrentSACRLModule
from rlx.algorithms.sac.sac_learner import SACLearner
from rlx.algorithms.sac.sac_rl_module import SACRLModule
from rlx.core.catalog import INIT_KEYS
from rlx.core.model_defaults import merge_model_config
from rlx.core.rl_module.rl_module import RLModuleSpec
from rlx.utils.errors import ConfigError, did_you_mean

T = ("training",)


def _target_entropy(name: str, value: Any) -> Any:
    if value == "auto":
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return number()(name, value)  # finite, within float32's range
    raise ConfigError(f"'{name}' must be 'auto' or a number, got {value!r}.")


def _net_config(name: str, value: Any) -> dict:
    value = dictionary()(name, value)
    allowed = {"fcnet_hiddens", "fcnet_activation", *INIT_KEYS}
    unknown = set(value) - allowed
    if unknown:
        key = sorted(unknown)[0]
        if key in ("use_lstm", "lstm_cell_size", "max_seq_len"):
            raise ConfigError(f"'{name}' has the key '{key}': recurrent SAC takes it from the model dict, for "
                              f"the policy and the critics together: set model={{'{key}': ...}}.")
        raise ConfigError(f"'{name}' has an unknown key '{key}'.{did_you_mean(key, allowed)} Accepted: "
                          f"{', '.join(sorted(allowed))}.")
    try:
        merge_model_config(None, value)  # the same checks as the model dict's keys
    except ConfigError as err:
        raise ConfigError(f"In '{name}': {err}") from err
    return value


class SACConfig(OffPolicyConfig):
    """Config of SAC for Box (squashed Gaussian) and Discrete action spaces.

    Example:
        >>> config = SACConfig().environment("Pendulum-v1").training(actor_lr=1e-3)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("twin_q", True, T, boolean, doc="Two Q-functions; targets use their minimum."),
        Option("initial_alpha", 1.0, T, number(0.0, exclusive_min=True), doc="Initial entropy coefficient."),
        Option("target_entropy", "auto", T, _target_entropy,
               doc="Entropy target of alpha tuning: 'auto' is -action_dim (Box) or 0.5 * log(n) (Discrete; RLlib's 0.98 * log(n) keeps the policy near uniform)."),
        Option("actor_lr", 1e-3, T, schedule_or_number(0.0), doc="Policy learning rate (or schedule)."),
        Option("critic_lr", 1e-3, T, schedule_or_number(0.0), doc="Q-function learning rate (or schedule)."),
        Option("alpha_lr", 1e-3, T, schedule_or_number(0.0), doc="Entropy-coefficient learning rate (or schedule)."),
        Option("q_model_config", {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}, T, _net_config,
               doc="Q-network layers: fcnet_hiddens, fcnet_activation."),
        Option("policy_model_config", {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}, T, _net_config,
               doc="Policy-network layers: fcnet_hiddens, fcnet_activation."),
        Option("optimization_config", None, T, dictionary(allow_none=True),
               doc="Old form of the learning rates: {actor_learning_rate, critic_learning_rate, "
                   "entropy_learning_rate}."),
        Option("_deterministic_loss", False, T, boolean, later="SAC's deterministic loss (debugging)"),
        Option("_use_beta_distribution", False, T, boolean, later="SAC with a Beta policy distribution"),
        *sequence_replay_options("SAC"),
    ]
    _default_overrides = {
        "lr": 3e-4,
        "train_batch_size": 256,
        "tau": 5e-3,
        "target_network_update_freq": 0,
        "num_steps_sampled_before_learning_starts": 1000,
        "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 1_000_000},
        "exploration_config": {"type": "StochasticSampling"},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or SAC)

    def validate(self) -> None:
        """Check settings; map the old optimization_config learning rates onto actor/critic/alpha_lr."""
        v = self._values
        opt = v["optimization_config"]
        if opt:
            names = {"actor_learning_rate": "actor_lr", "critic_learning_rate": "critic_lr",
                     "entropy_learning_rate": "alpha_lr"}
            for key, value in opt.items():
                if key not in names:
                    raise ConfigError(f"optimization_config has an unknown key '{key}'.{did_you_mean(key, names)}")
                v[names[key]] = schedule_or_number(0.0)(key, value)
            v["optimization_config"] = None
        fold_sequence_replay_settings(v, "SAC")
        super().validate()


class SAC(OffPolicyAlgorithm):
    """Soft Actor-Critic (Haarnoja et al., 2018) with twin Q and automatic entropy tuning."""

    _config_class = SACConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        if self.config.model.get("use_lstm"):
            return RecurrentSACLearner
        return SACLearner

    def setup(self, config: AlgorithmConfig) -> None:
        """OffPolicyAlgorithm's setup; a recurrent module (model use_lstm) replays sequences instead."""
        setup_sequence_replay(self, config, "SAC", super().setup)

    def get_default_rl_module_spec(self) -> Any:
        """SAC's policy and twin critics, sized by policy_model_config and q_model_config (with
        model use_lstm: RecurrentSACRLModule, an LSTM in the policy and in each critic)."""
        cfg = self.config
        model = {**cfg.model, "twin_q": cfg.twin_q, "policy_model_config": dict(cfg.policy_model_config),
                 "q_model_config": dict(cfg.q_model_config)}
        # Only learners that train on replayed sequences get the recurrent module (CQL's does not).
        if cfg.model.get("use_lstm") and not cfg.model.get("custom_model") and \
                getattr(self._resolved_learner_class(), "supports_recurrent_modules", False):
            return RLModuleSpec(module_class=RecurrentSACRLModule, model_config=model)
        return RLModuleSpec(module_class=SACRLModule, model_config=model)


SACTrainer = SAC
DEFAULT_CONFIG = SACConfig().to_dict()
