"""IMPALA: its config (options and defaults) and its asynchronous training step."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, choice, count, integer, number, schedule_or_number, seconds
from rlx.algorithms.impala.aggregators import AggregatorPool, join_remotely
from rlx.algorithms.impala.impala_learner import IMPALALearner
from rlx.algorithms.impala.learner_queue import LearnerQueue
from rlx.algorithms.impala.object_refs import PendingBatch, fetch_parts, join_parts, put_fragment
from rlx.core.sample_batch import as_multi_agent
from rlx.env.env_runner_group import AsyncSample, join_runner_batches
from rlx.utils.errors import ConfigError, RLXError

T = ("training",)
GPU_LEARNERS = "GPU learners"


def _vtrace_on(name: str, value: Any) -> bool:
    value = boolean(name, value)
    if not value:
        raise ConfigError("IMPALA needs vtrace=True (its loss is V-trace's, as in RLlib); for an on-policy "
                          "actor-critic without importance weighting use A2C, or APPO with vtrace=False (GAE).")
    return value


class IMPALAConfig(AlgorithmConfig):
    """Config of IMPALA (Espeholt et al., 2018): asynchronous sampling with V-trace corrections.

    With remote EnvRunners (`env_runners(num_env_runners=N)`) the runners keep sampling while
    the learner trains; their fragments wait in a learner queue of `learner_queue_size` train
    batches. Without, the driver's runner samples between updates (no policy lag).

    Example:
        >>> config = IMPALAConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("vtrace", True, T, _vtrace_on, doc="Use V-trace importance-weighted targets (IMPALA needs True)."),
        Option("vtrace_clip_rho_threshold", 1.0, T, number(0.0, exclusive_min=True),
               doc="V-trace's rho-bar: clip of the importance weights of the value targets."),
        Option("vtrace_clip_pg_rho_threshold", 1.0, T, number(0.0, exclusive_min=True),
               doc="Clip of the importance weights of the policy-gradient advantages."),
        Option("vf_loss_coeff", 0.5, T, number(0.0), doc="Weight of the value-function loss."),
        Option("entropy_coeff", 0.01, T, schedule_or_number(0.0), aliases=("entropy_coeff_schedule",),
               doc="Entropy bonus: a float or a schedule [[timestep, value], ...]."),
        Option("num_epochs", 1, T, count(1), aliases=("num_sgd_iter",),
               doc="Passes over each train batch."),
        Option("minibatch_size", None, T, integer(1, allow_none=True),
               aliases=("sgd_minibatch_size", "mini_batch_size_per_learner"),
               doc="Env steps per SGD minibatch, taken as whole trajectories (None: the whole train batch)."),
        Option("learner_queue_size", 3, T, integer(1),
               doc="Train batches that may wait for the learner. While the queue is full the runners get no new "
                   "sample requests (so they run at most this far ahead of the learner); a batch arriving at a "
                   "full queue replaces the oldest (counted in async_sampling/num_env_steps_dropped)."),
        Option("learner_queue_timeout", 300.0, T, seconds(exclusive_min=True),
               doc="Seconds a training step waits for samples while the learner queue is empty before it fails "
                   "with an error."),
        Option("timeout_s_sampler_manager", 0.0, T, seconds(),
               doc="Seconds a training step waits for more sample results while the learner has a batch to "
                   "train on (with an empty queue it waits for the first result)."),
        Option("timeout_s_aggregator_manager", 0.0, T, seconds(),
               later="aggregator actors (rlx's EnvRunners return ready time-major batches)"),
        Option("broadcast_interval", 1, T, integer(1),
               doc="Learner updates between sending new weights to the runners."),
        Option("num_multi_gpu_tower_stacks", 1, T, integer(1),
               doc="On CPU, the train batches the learner loads and trains on per training step (a multi-GPU "
                   "learner loads one batch per tower stack). More drains a full queue faster, with fewer "
                   "sample harvests in between."),
        Option("minibatch_buffer_size", 1, T, integer(1),
               later="the old API stack's minibatch ring buffer (use num_epochs, or APPO's circular buffer)"),
        Option("replay_proportion", 0.0, T, number(0.0), later="IMPALA's mix-in replay"),
        Option("replay_buffer_num_slots", 0, T, integer(0), later="IMPALA's mix-in replay"),
        Option("opt_type", "adam", T, choice("adam", "rmsprop"),
               doc="'adam', or 'rmsprop' with decay, momentum and epsilon (sets the optimizer unless "
                   "optimizer is given)."),
        Option("decay", 0.99, T, number(0.0, 1.0), doc="RMSprop's decay (torch's alpha), with opt_type='rmsprop'."),
        Option("momentum", 0.0, T, number(0.0), doc="RMSprop's momentum, with opt_type='rmsprop'."),
        Option("epsilon", 0.1, T, number(0.0, exclusive_min=True), doc="RMSprop's epsilon, with opt_type='rmsprop'."),
        Option("_separate_vf_optimizer", False, T, boolean, later="a separate value-function optimizer"),
        Option("_lr_vf", 0.0005, T, number(0.0), later="a separate value-function optimizer"),
        Option("num_gpu_loader_threads", 8, T, integer(1), later=GPU_LEARNERS),
        Option("num_aggregator_actors_per_learner", 0, ("learners",), integer(0),
               doc="Aggregator actors (Ray actors, 1 CPU each) per learner (per driver learner with num_learners=0) "
                   "that join the fragment references of the Ray EnvRunners into train batches in the object store, "
                   "so no fragment passes through the driver (needs Ray; 0: the learner's side joins them)."),
    ]
    _default_overrides = {
        "lr": 0.0005,
        "grad_clip": 40.0,
        "rollout_fragment_length": 50,
        "train_batch_size": 500,
        "min_time_s_per_iteration": 10,
    }

    #: Runs on each remote EnvRunner with every asynchronous fragment: inside a Ray actor it puts
    #: the fragment in the object store and answers its reference (rlx.algorithms.impala.object_refs).
    runner_fragment_hook = staticmethod(put_fragment)

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or IMPALA)

    def validate(self) -> None:
        """Check settings and fold opt_type='rmsprop' (with decay, momentum, epsilon) into `optimizer`."""
        v = self._values
        if v["opt_type"] == "rmsprop":
            if v["optimizer"] and self.is_user_set("optimizer"):
                raise ConfigError("opt_type='rmsprop' and optimizer are both set; keep one of them.")
            v["optimizer"] = {"type": "RMSprop", "alpha": v["decay"], "momentum": v["momentum"], "eps": v["epsilon"]}
        super().validate()

    def _validate_algorithm_settings(self) -> None:
        v = self._values
        fragment = v["rollout_fragment_length"]
        if v["minibatch_size"] is not None:
            if v["minibatch_size"] > self.total_train_batch_size:
                raise ConfigError(f"minibatch_size ({v['minibatch_size']}) is larger than the train batch "
                                  f"({self.total_train_batch_size}); lower it, or leave it None (the whole batch).")
            if fragment != "auto" and v["minibatch_size"] % int(fragment):
                raise ConfigError(f"minibatch_size ({v['minibatch_size']}) must be a multiple of "
                                  f"rollout_fragment_length ({fragment}): minibatches are whole trajectories.")


ImpalaConfig = IMPALAConfig


class IMPALA(Algorithm):
    """Importance-weighted actor-learner architecture (Espeholt et al., 2018).

    Each training step harvests the fragments the remote runners finished (they sample on
    while the learner trains), assembles them into train batches of `train_batch_size` steps
    in a bounded learner queue, trains on up to `num_multi_gpu_tower_stacks` of them, and hands
    the new weights to each runner with its next sample request (every `broadcast_interval`
    updates). `result["async_sampling"]` reports the policy lag (learner updates between the
    weights that sampled a fragment and those it was trained from), the queue's fill and the
    requests in flight.

    On Ray EnvRunners the fragments stay in Ray's object store: the driver gets references and
    step counts (IMPALAConfig.runner_fragment_hook), the queue holds references, and the arrays
    are fetched where the learner is (the driver's learner with num_learners=0, each learner
    actor where the learner group takes references). With `num_aggregator_actors_per_learner > 0`
    aggregator actors join each train batch's fragments, so the driver handles one reference per
    train batch (rlx.algorithms.impala.aggregators).
    """

    _config_class = IMPALAConfig

    @property
    def _learner_class(self) -> Any:  # type: ignore[override]

        return IMPALALearner

    def setup(self, config: AlgorithmConfig) -> None:
        """Create runners, learner and the learner queue."""
        super().setup(config)
        self.learner_queue = self.make_learner_queue()
        self._fragments: list[AsyncSample] = []
        self._fragment_steps = 0
        #: The weights version the runners are given (moves every broadcast_interval updates).
        self._broadcast_version = self.weights_version
        #: Env steps one sample request brings: a fragment of each sub-env (or the largest seen).
        self._steps_per_request = config.get_rollout_fragment_length() * self.env_runner_group.num_envs_per_env_runner
        #: Aggregator actors joining fragment references into train batches (None: not asked for).
        self.aggregators: AggregatorPool | None = None
        if config.num_aggregator_actors_per_learner > 0:
            self.aggregators = AggregatorPool(config.num_aggregator_actors_per_learner * max(1, config.num_learners))

    def make_learner_queue(self) -> LearnerQueue:
        """The queue of train batches waiting for the learner: FIFO, `learner_queue_size` batches,
        each trained on once."""
        return LearnerQueue(self.config.learner_queue_size)

    def training_step(self) -> dict[str, Any]:
        """Harvest finished fragments, queue full train batches, train on queued ones."""
        cfg = self.config
        queue = self.learner_queue
        started = time.monotonic()
        samples = self.env_runner_group.async_sample(
            weights_from=self.learner, weights_seq_no=self._broadcast_version,
            global_vars={"timestep": self._counters["num_env_steps_sampled_lifetime"]},
            max_new_requests=self._sample_request_budget(),
            wait_s=cfg.timeout_s_sampler_manager if len(queue) else cfg.learner_queue_timeout)
        if not samples and not len(queue) and time.monotonic() - started >= cfg.learner_queue_timeout:
            raise RLXError(f"{type(self).__name__}'s learner got no samples for learner_queue_timeout="
                           f"{cfg.learner_queue_timeout:g} s: are the EnvRunners stuck? Raise it for slow envs.")
        for sample in samples:
            self._add_fragment(sample)
        metrics: dict[str, Any] = {}
        for _ in range(cfg.num_multi_gpu_tower_stacks):
            item = queue.get()
            if item is None:
                break
            pending: PendingBatch = item
            lags = self.weights_version - pending.seq_nos
            self.metrics.log_value(("async_sampling", "policy_lag_mean"), float(lags.mean()), window=100_000,
                                   clear_on_reduce=True)
            self.metrics.log_value(("async_sampling", "policy_lag_max"), int(lags.max()), reduce="max",
                                   clear_on_reduce=True)
            metrics = self._learn_on_pending(pending) or metrics
        if self.weights_version - self._broadcast_version >= cfg.broadcast_interval:
            self._broadcast_version = self.weights_version
        self._log_queue_state()
        return self.module_results(metrics) if metrics else {}

    def _sample_request_budget(self) -> int:
        """How many more sample requests the learner queue has room for, counting the fragments
        in flight and those waiting to fill a train batch (back pressure)."""
        queue = self.learner_queue
        in_flight = self.env_runner_group.num_sample_requests_in_flight()
        room = (queue.capacity - len(queue)) * self.config.total_train_batch_size - self._fragment_steps
        budget = max(0, (room - in_flight * self._steps_per_request) // self._steps_per_request)
        # A fragment larger than the whole queue still has to come, one at a time.
        return budget if budget or len(queue) or in_flight else 1

    def _add_fragment(self, sample: AsyncSample) -> None:
        """Count a harvested fragment and queue a train batch once `train_batch_size` steps are in."""
        self._steps_per_request = max(self._steps_per_request, sample.env_steps)
        steps = self.count_sampled(sample.batch)
        self._fragments.append(sample)
        self._fragment_steps += steps
        if self._fragment_steps < self.config.total_train_batch_size:
            return
        pending = PendingBatch([s.batch for s in self._fragments],
                               sum(as_multi_agent(s.batch).env_steps() for s in self._fragments),
                               sum(as_multi_agent(s.batch).agent_steps() for s in self._fragments),
                               self._fragment_steps, np.asarray([s.weights_seq_no for s in self._fragments]))
        if not pending.by_reference:
            pending.parts = [join_runner_batches(pending.parts)]  # joined once, here
        elif self.aggregators is not None:
            pending.parts = [self.aggregators.join(pending.parts)]
        dropped = self.learner_queue.put(pending, self._fragment_steps)
        self.metrics.log_value(("async_sampling", "num_env_steps_dropped_lifetime"), dropped, reduce="sum")
        self._fragments, self._fragment_steps = [], 0

    def _learn_on_pending(self, pending: PendingBatch) -> dict[str, Any]:
        """Update on a queued train batch: its reference goes to learners that take references
        (a learner group of Ray actors), else its arrays are fetched here; counts it trained.
        Returns the learner metrics ({} when its data was lost with a runner or aggregator)."""
        timestep = self._counters["num_env_steps_sampled_lifetime"]
        group = self._ref_taking_learner() if pending.by_reference else None
        if group is not None:
            ref = pending.single_ref()
            if ref is None:
                ref = join_remotely(pending.parts)
                pending.parts = [ref]  # joined once: APPO's circular buffer may hand it out again
            metrics = group.run_update(ref, timestep=timestep)
            self.weights_version += 1
            self.count_trained(pending.counts)
            return metrics
        batch = self._fetch_pending(pending)
        if batch is None:
            self.metrics.log_value(("async_sampling", "num_env_steps_dropped_lifetime"), pending.steps, reduce="sum")
            return {}
        pending.parts = [batch]  # fetched once: APPO's circular buffer may hand it out again
        metrics = self.learn_on_batch(batch, timestep=timestep)
        self.count_trained(batch)
        return metrics

    @staticmethod
    def _fetch_pending(pending: PendingBatch) -> Any:
        """The train batch's arrays (one ray.get for its references); None when all were lost."""
        if not pending.by_reference:
            return pending.parts[0]
        if pending.single_ref() is not None:
            from ray import exceptions as rex

            try:
                parts = fetch_parts(pending.parts)
            except rex.RayActorError:  # its aggregator died before it answered
                return None
            return parts[0] if parts else None
        return join_parts(pending.parts)

    def _ref_taking_learner(self) -> Any:
        """The learner group that fetches train batches from the object store itself, or None.

        That is a single-agent run's group of Ray learner actors (`learner_backend` "ray", which
        take an ObjectRef of the module's batch) when nothing must see the batch in the driver
        first (a learner connector pipeline, on_learn_on_batch callbacks). Multi-agent train
        batches are fetched here and go through the learner container, module by module."""
        learners = self.learners
        if learners.sole_module_id is None or getattr(self, "_learner_connector", None) is not None \
                or self._on_learn_on_batch is not None:
            return None
        group = learners.by_module()[learners.sole_module_id]
        return group if getattr(group, "learner_backend", None) == "ray" else None

    def stop(self) -> None:
        """Stop the aggregator actors, then everything else."""
        aggregators = getattr(self, "aggregators", None)
        if aggregators is not None:
            aggregators.stop()
        super().stop()

    def _log_queue_state(self) -> None:
        queue = self.learner_queue
        section = "async_sampling"
        self.metrics.log_value((section, "learner_queue_size_mean"), len(queue), window=100_000,
                               clear_on_reduce=True)
        self.metrics.log_value((section, "learner_queue_capacity"), queue.capacity, window=1)
        self.metrics.log_value((section, "sample_requests_in_flight"),
                               self.env_runner_group.num_sample_requests_in_flight(), window=1)


# Old names (Trainer era).
ImpalaTrainer = IMPALA
Impala = IMPALA

DEFAULT_CONFIG = IMPALAConfig().to_dict()
