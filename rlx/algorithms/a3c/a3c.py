"""A3C (asynchronous advantage actor-critic): its config (options and defaults) and its asynchronous
training step. The loss is A2C's (rlx/algorithms/a2c/a2c_learner.py)."""
from __future__ import annotations

from typing import Any

from rlx.algorithms.a2c.a2c import A2C, A2CConfig
from rlx.algorithms.config_options import Option, count
from rlx.core.remote_fragment import RemoteFragment
from rlx.utils.errors import ConfigError

T = ("training",)


def _torch_side() -> Any:
    """rlx.algorithms.a3c.runner_gradients (A3C's learner and runner gradients), imported when
    first used: it loads torch, which importing A3C's config does not."""
    from rlx.algorithms.a3c import runner_gradients

    return runner_gradients


def _runner_gradients(runner: Any, batch: Any) -> Any:
    """A3CConfig's runner_fragment_hook: runner_gradients.runner_gradients (on the runner)."""
    return _torch_side().runner_gradients(runner, batch)


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

    #: Runs on each remote EnvRunner with every asynchronous fragment: computes its gradient there
    #: (rlx.algorithms.a3c.runner_gradients).
    runner_fragment_hook = staticmethod(_runner_gradients)

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or A3C)

    def _validate_algorithm_settings(self) -> None:
        super()._validate_algorithm_settings()
        if int(self._values["num_learners"] or 0) > 0 and int(self._values["num_env_runners"] or 0) > 0:
            raise ConfigError("A3C's remote EnvRunners compute the gradients and the driver's Learner applies them, "
                              "one fragment at a time: there is nothing for data-parallel learners to do. Set "
                              "num_learners=0 (or use A2C/PPO with num_learners > 0).")


class A3C(A2C):
    """Asynchronous advantage actor-critic.

    The remote EnvRunners sample fragments of `rollout_fragment_length` steps asynchronously
    (EnvRunnerGroup.async_sample) and each computes its fragment's A2C gradient on the weights
    that sampled it (rlx.algorithms.a3c.runner_gradients, on every backend: process, Ray,
    thread). The driver's Learner applies each gradient as it arrives (one optimizer step per
    fragment, in arrival order); the runner that sent it then gets the new weights with its next
    sample request, as in RLlib's A3C. Where the batch must be seen in the driver (a learner
    connector, an on_learn_on_batch callback, a learner on another device; see
    `runner_computes_gradients`) the runners send fragments and the driver computes the same
    gradient. Without remote runners the driver's runner samples a fragment and the learner
    steps on it, synchronously (A2C on fragments). `result["async_sampling"]` reports the policy lag (updates
    between a fragment's weights and the one its gradient is applied to).
    """

    _config_class = A3CConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]
        return _torch_side().A3CLearner

    def setup(self, config: Any) -> None:
        """A2C's setup; notes whether the runners compute the gradients."""
        super().setup(config)
        remote = self.env_runner_group.num_remote_env_runners() > 0
        #: Why the driver computes the gradients of remote fragments (None: the runners do).
        self.driver_gradients_reason = _torch_side().runner_computes_gradients(self.config) if remote else "no remote EnvRunners"

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
                update = self._apply(sample.batch, timestep=self._counters["num_env_steps_sampled_lifetime"])
                # The latest metrics of each module (a multi-agent fragment may hold some policies only).
                if update:
                    metrics = {**metrics, **self.module_results(update)}
                self.count_trained(sample.batch, steps)
                applied += 1
        self.metrics.log_value(("async_sampling", "num_gradients_applied"), applied, reduce="sum",
                               clear_on_reduce=True)
        return metrics

    def _apply(self, fragment: Any, timestep: int) -> dict[str, Any]:
        """One optimizer step: on a runner's gradient (a RemoteFragment), or on a fragment's
        gradient computed here (a fragment the runner could not handle, e.g. one a failed
        runner left behind); the learner metrics as learn_on_batch returns them."""
        if not isinstance(fragment, RemoteFragment):
            return self.learn_on_batch(fragment, timestep=timestep)
        gradients_key = _torch_side().GRADIENTS
        payload = fragment.payload
        learners = self.learners.by_module()
        metrics: dict[str, Any] = {}
        for module_id, grads in payload[gradients_key].items():
            applied = learners[module_id].apply_runner_gradients(grads, timestep)
            metrics[module_id] = {**payload["metrics"].get(module_id, {}), **applied}
        self.weights_version += 1
        return self.learners.learner_result(metrics)

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
