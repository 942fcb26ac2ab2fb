"""Deep Deterministic Policy Gradient: config (options and defaults) and algorithm."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, choice, integer, number, schedule_or_number
from rlx.algorithms.ddpg.ddpg_learner import DDPGLearner
from rlx.algorithms.ddpg.ddpg_rl_module import DDPGRLModule
from rlx.algorithms.ddpg.recurrent_ddpg_learner import RecurrentDDPGLearner
from rlx.algorithms.ddpg.recurrent_ddpg_rl_module import RecurrentDDPGRLModule
from rlx.algorithms.off_policy import OffPolicyAlgorithm, OffPolicyConfig
from rlx.algorithms.recurrent_replay import (fold_sequence_replay_settings, sequence_replay_options,
                                             setup_sequence_replay)
from rlx.core.rl_module.rl_module import RLModuleSpec
from rlx.utils.errors import ConfigError, NotSupportedYetError

T = ("training",)
_ACTIVATIONS = ("relu", "tanh", "elu", "swish", "silu", "linear")


def _hiddens(name: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in value
    ):
        raise ConfigError(f"'{name}' must be a list of positive layer sizes, e.g. [256, 256]; got {value!r}.")
    return list(value)


class DDPGConfig(OffPolicyConfig):
    """Config of DDPG (Lillicrap et al., 2016) for 1-D Box action spaces; TD3Config extends it.

    Defaults follow RLlib's except: networks of [256, 256] (RLlib: [400, 300]; about 1.7x
    faster per update), `tau=0.005` (RLlib: 0.002) and
    `num_steps_sampled_before_learning_starts=1000` (RLlib: 1500), which learn Pendulum-v1
    faster, and `l2_reg=0.0` (RLlib: 1e-6).

    Example:
        >>> config = DDPGConfig().environment("Pendulum-v1").training(actor_lr=1e-3)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("twin_q", False, T, boolean, doc="Two Q-functions; targets use their minimum (TD3's clipped double Q)."),
        Option("policy_delay", 1, T, integer(1),
               doc="Critic updates per actor (and target-network) update; TD3 uses 2."),
        Option("smooth_target_policy", False, T, boolean,
               doc="Add clipped Gaussian noise to the target action (TD3's target policy smoothing)."),
        Option("target_noise", 0.2, T, number(0.0),
               doc="Standard deviation of the target-policy smoothing noise (in the [-1, 1] action range)."),
        Option("target_noise_clip", 0.5, T, number(0.0),
               doc="The smoothing noise is clipped to [-target_noise_clip, target_noise_clip]."),
        Option("use_state_preprocessor", False, T, boolean, later="DDPG with the model's state preprocessor"),
        Option("actor_hiddens", [256, 256], T, _hiddens, doc="Layer sizes of the actor (RLlib: [400, 300])."),
        Option("actor_hidden_activation", "relu", T, choice(*_ACTIVATIONS), doc="Activation of the actor's layers."),
        Option("critic_hiddens", [256, 256], T, _hiddens, doc="Layer sizes of each critic (RLlib: [400, 300])."),
        Option("critic_hidden_activation", "relu", T, choice(*_ACTIVATIONS),
               doc="Activation of the critics' layers."),
        Option("actor_lr", 1e-3, T, schedule_or_number(0.0), doc="Actor learning rate (or schedule)."),
        Option("critic_lr", 1e-3, T, schedule_or_number(0.0), doc="Critic learning rate (or schedule)."),
        Option("use_huber", False, T, boolean, doc="Huber loss instead of the squared TD error for the critics."),
        Option("huber_threshold", 1.0, T, number(0.0, exclusive_min=True), doc="Threshold of the Huber loss."),
        Option("l2_reg", 0.0, T, number(0.0),
               doc="Weight of the L2 penalty 0.5 * sum(w**2) on the critics' weight matrices (RLlib: 1e-6; "
                   "0 disables it)."),
        *sequence_replay_options("DDPG/TD3"),
    ]
    _default_overrides = {
        "tau": 0.005,
        "target_network_update_freq": 0,
        "train_batch_size": 256,
        "num_steps_sampled_before_learning_starts": 1000,
        "rollout_fragment_length": 1,
        "replay_buffer_config": {"type": "EpisodeReplayBuffer", "capacity": 50000},
        "exploration_config": {"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 1000, "ou_base_scale": 0.1,
                               "ou_theta": 0.15, "ou_sigma": 0.2, "initial_scale": 1.0, "final_scale": 0.02,
                               "scale_timesteps": 10000},
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or DDPG)

    def validate(self) -> None:
        """Check settings; with model use_lstm, fold the old sequence-replay keys (recurrent DDPG/TD3)."""
        fold_sequence_replay_settings(self._values, "DDPG/TD3")
        super().validate()


class DDPG(OffPolicyAlgorithm):
    """Deep Deterministic Policy Gradient: a deterministic actor trained through a learned Q-function."""

    _config_class = DDPGConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        if self.config.model.get("use_lstm"):
            return RecurrentDDPGLearner
        return DDPGLearner

    def setup(self, config: AlgorithmConfig) -> None:
        """OffPolicyAlgorithm's setup; a recurrent module (model use_lstm) replays sequences instead."""
        if config.model.get("use_lstm") and hasattr(self, "apex_update_due"):
            raise NotSupportedYetError(f"model use_lstm with {type(self).__name__}",
                                       "recurrent DDPG and TD3 replay sequences in the synchronous training step",
                                       fix="Use DDPG or TD3 for recurrent policies, or leave use_lstm off.")
        setup_sequence_replay(self, config, type(self).__name__, super().setup)

    def get_default_rl_module_spec(self) -> Any:
        """The actor and critic(s), sized by actor_/critic_hiddens and _hidden_activation (with
        model use_lstm: RecurrentDDPGRLModule, an LSTM in the actor and in each critic)."""
        cfg = self.config
        model = {
            **cfg.model,
            "twin_q": cfg.twin_q,
            "actor_hiddens": list(cfg.actor_hiddens),
            "actor_hidden_activation": cfg.actor_hidden_activation,
            "critic_hiddens": list(cfg.critic_hiddens),
            "critic_hidden_activation": cfg.critic_hidden_activation,
        }
        if cfg.model.get("use_lstm") and not cfg.model.get("custom_model"):
            return RLModuleSpec(module_class=RecurrentDDPGRLModule, model_config=model)
        return RLModuleSpec(module_class=DDPGRLModule, model_config=model)


# Old names (Trainer era).
DDPGTrainer = DDPG
DEFAULT_CONFIG = DDPGConfig().to_dict()
