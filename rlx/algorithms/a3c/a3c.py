"""A3C (asynchronous advantage actor-critic): its config (options and defaults) and its asynchronous
training step. The loss is A2C's (rlx/algorithms/a2c/a2c_learner.py)."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.a2c.a2c import A2C, A2CConfig
from rlx.algorithms.config_options import Option, count

T = ("training",)


class A3CConfig(A2CConfig):
    """Config of A3C (Mnih et al., 2016). Defaults are RLlib's (rollout_fragment_length 10,
    grads_per_step 100, lr 0.0001, entropy_coeff 0.01, vf_loss_coeff 0.5, use_gae with lambda 1.0,
    grad_clip 40, min_time_s_per_iteration 5), with rlx's one-process default num_env_runners=0
    and one sample request in flight per runner (a runner waits for the weights that include its
    own last gradient, as in A3C).

    Example:
        >>> config = A3CConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("grads_per_step", 100, T, count(1),
               doc="Gradients (one per arriving fragment) applied per training step."),
    ]
    _default_overrides = {
        "rollout_fragment_length": 10,
        "min_time_s_per_iteration": 5,
        "max_requests_in_flight_per_env_runner": 1,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or A3C)


class A3C(A2C):
    """Asynchronous advantage actor-critic.

    The remote EnvRunners sample fragments of `rollout_fragment_length` steps asynchronously
    (EnvRunnerGroup.async_sample). Each fragment's A2C gradient is computed and applied by the
    driver's Learner as soon as the fragment arrives (one optimizer step per fragment); the
    runner that sent it then gets the new weights with its next sample request. Where RLlib's
    runners compute the gradient and ship it, rlx's ship the fragment (a few kB for small
    fragments) and the driver computes the gradient: the same update, applied in arrival order.
    Without remote runners the driver's runner samples a fragment and the learner steps on it,
    synchronously (A2C on fragments). `result["async_sampling"]` reports the policy lag (updates
    between a fragment's weights and the one its gradient is applied to).
    """

    _config_class = A3CConfig

    def training_step(self) -> dict[str, Any]:
        """Apply `grads_per_step` gradients, one per fragment, in the order fragments arrive."""
        cfg = self.config
        group = self.env_runner_group
        metrics: dict[str, Any] = {}
        applied = 0
        while applied < cfg.grads_per_step:
            samples = group.async_sample(
                weights_from=self.learner, weights_seq_no=self.weights_version,
                global_vars={"timestep": self._counters["num_env_steps_sampled_lifetime"]},
                max_new_requests=self._free_request_slots())
            if not samples:
                break  # a runner failed and fault tolerance let it go; train() calls again
            for sample in samples:
                steps = self.count_sampled(sample.batch)
                lag = self.weights_version - sample.weights_seq_no
                self.metrics.log_value(("async_sampling", "policy_lag_mean"), float(lag), window=100_000,
                                       clear_on_reduce=True)
                self.metrics.log_value(("async_sampling", "policy_lag_max"), int(lag), reduce="max",
                                       clear_on_reduce=True)
                update = self.learn_on_batch(sample.batch, timestep=self._counters["num_env_steps_sampled_lifetime"])
                # The latest metrics of each module (a multi-agent fragment may hold some policies only).
                if update:
                    metrics = {**metrics, **self.module_results(update)}
                self.count_trained(sample.batch, steps)
                applied += 1
        self.metrics.log_value(("async_sampling", "num_gradients_applied"), applied, reduce="sum",
                               clear_on_reduce=True)
        return metrics

    def _free_request_slots(self) -> int | None:
        """Sample requests the remote runners can take now (each may have
        max_requests_in_flight_per_env_runner). Asking for exactly these lets async_sample fill the
        idle runners, with the newest weights, before it waits, and queue nothing after: a runner
        that delivers waits for the weights its fragment's gradient went into."""
        group = self.env_runner_group
        if group.num_remote_env_runners() == 0:
            return None
        slots = int(self.config.max_requests_in_flight_per_env_runner) * group.num_healthy_remote_workers()
        return max(0, slots - group.num_sample_requests_in_flight())


# Old names (Trainer era).
A3CTrainer = A3C

DEFAULT_CONFIG = A3CConfig().to_dict()
