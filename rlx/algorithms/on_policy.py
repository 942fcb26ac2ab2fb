"""The synchronous on-policy loop (PPO, PG, A2C, MARWIL, DDPPO without workers):
`OnPolicyAlgorithm.training_step` samples (or reads) `train_batch_size` steps with the current
weights, updates the learner on them once, and pushes the new weights to the EnvRunners.

The replay-based loop is `rlx.algorithms.off_policy.OffPolicyAlgorithm`; asynchronous
algorithms (IMPALA, APPO, A3C, APEX) write their own training_step on the same Algorithm
primitives (`count_sampled`, `learn_on_batch`, `count_trained`, `sync_env_runner_weights`).
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm import Algorithm
from rlx.utils.metrics.result_keys import ENV_RUNNER_SAMPLING_TIMER, TIMERS


class OnPolicyAlgorithm(Algorithm):
    """Base of the synchronous on-policy algorithms: one update per sampled train batch."""

    def training_step(self) -> dict[str, Any]:
        """Sample a train batch, update on it, and push the new weights; {module_id: metrics}."""
        return self.sample_and_learn()

    def sample_and_learn(self) -> dict[str, Any]:
        """The synchronous on-policy training step: sample (or read) `train_batch_size` steps,
        update on them, push the new weights, return the module results."""
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            batch = self.env_runner_group.sample(num_timesteps=self.config.total_train_batch_size)
        steps = self.count_sampled(batch)
        metrics = self.learn_on_batch(batch, timestep=self._counters["num_env_steps_sampled_lifetime"])
        self.count_trained(batch, steps)
        self.sync_env_runner_weights()
        return self.module_results(metrics)
