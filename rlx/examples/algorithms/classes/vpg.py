"""VPG: vanilla policy gradient as a custom Algorithm (RLlib's `examples.algorithms.classes.vpg`).

The example of how RLlib users write an algorithm of their own: an `AlgorithmConfig` subclass
with one option of its own (`num_episodes_per_train_batch`) and defaults for the RLModule
(`VPGTorchRLModule`) and Learner (`VPGTorchLearner`), and an `Algorithm` subclass whose
`training_step` samples complete episodes from the EnvRunners, updates the LearnerGroup on them
(`learner_group.update(episodes=...)`) and syncs the new weights back, logging into
`self.metrics` as it goes. No value-function baseline: the loss is -mean(logp * return-to-go).
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from rlx.core.rl_module.rl_module import RLModuleSpec
from rlx.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)


class VPGConfig(AlgorithmConfig):
    """Config of the VPG example algorithm (for tests and examples, not for real training).

    Its only option of its own is `training(num_episodes_per_train_batch=...)`: how many complete
    episodes each update trains on (split over the EnvRunners).
    """

    #: Whether VPGTorchLearner reports the mean weight of each module (RLlib's test switch).
    report_mean_weights: bool = True

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or VPG)
        self.num_episodes_per_train_batch = 10
        # training_step asks for whole episodes anyway; this says so for anything else reading it.
        self.batch_mode = "complete_episodes"
        self.num_env_runners = 1

    def training(self, *, num_episodes_per_train_batch: Any = NotProvided, **kwargs: Any) -> "VPGConfig":
        """AlgorithmConfig.training plus `num_episodes_per_train_batch` (complete episodes per update)."""
        super().training(**kwargs)
        if num_episodes_per_train_batch is not NotProvided:
            self.num_episodes_per_train_batch = num_episodes_per_train_batch
        return self

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        """VPGTorchRLModule with a 64-unit hidden layer."""
        from rlx.examples.rl_modules.classes.vpg_torch_rlm import VPGTorchRLModule

        return RLModuleSpec(module_class=VPGTorchRLModule, model_config={"hidden_dim": 64})

    def get_default_learner_class(self) -> type:
        """VPGTorchLearner."""
        from rlx.examples.learners.classes.vpg_torch_learner import VPGTorchLearner

        return VPGTorchLearner


class VPG(Algorithm):
    """The VPG algorithm: sample episodes, update the learners on them, sync weights."""

    @classmethod
    def get_default_config(cls) -> VPGConfig:
        """A fresh VPGConfig."""
        return VPGConfig()

    def training_step(self) -> None:
        """One iteration: `num_episodes_per_train_batch` complete episodes from the EnvRunners, one
        LearnerGroup update on them, then the new weights to the EnvRunners."""
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = self._sample_episodes()
        self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)

        steps = sum(map(len, episodes))
        self.metrics.log_value("episode_timesteps_sampled_mean_win100", steps, reduce="mean", window=100)
        self.metrics.log_value("episode_timesteps_sampled_ema", steps, ema_coeff=0.1)

        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results = self.learner_group.update(
                episodes=episodes,
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                        (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME)),
                },
            )
        self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)

        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner_group, inference_only=True)

    def _sample_episodes(self) -> tuple[list[Any], list[dict[str, Any]]]:
        """(all EnvRunners' complete episodes, one metrics dict per EnvRunner)."""
        per_runner = self.config.num_episodes_per_train_batch // (self.config.num_env_runners or 1)
        sampled = self.env_runner_group.foreach_env_runner(
            lambda env_runner: (env_runner.sample(num_episodes=per_runner), env_runner.get_metrics()),
            local_env_runner=self.env_runner_group.num_remote_workers() <= 0,
        )
        episodes = [episode for episodes_, _ in sampled for episode in episodes_]
        return episodes, [metrics for _, metrics in sampled]
