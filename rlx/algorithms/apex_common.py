"""Ape-X (Horgan et al., 2018): distributed prioritized replay, shared by APEX-DQN and APEX-DDPG.

The remote EnvRunners sample without pause through EnvRunnerGroup's one asynchronous mechanism
(`async_sample`, the one IMPALA and APPO use), each with its own exploration (the per-worker
epsilon or noise scale 0.4 ** (1 + 7 * (i - 1) / (N - 1)) of `PerWorkerEpsilonGreedy` /
`PerWorkerGaussianNoise`). The driver adds every fragment to the prioritized replay buffer,
each runner's sub-envs on their own lanes so n-step returns never join two runners' steps.

A learner thread (`ApexLearnerThread`) replays train batches and updates concurrently with
sampling (torch releases the GIL inside its ops), as long as the replayed steps stay below
`training_intensity` times the sampled ones, and writes each batch's new priorities (|TD
error|) back to the buffer as soon as its update finishes. The runners get the newest
weights with their next sample request. The thread runs while `train()` runs and pauses
between calls, so checkpoints, `compute_single_action` and weight changes see a quiet learner.

On Ray EnvRunners (with `num_replay_buffer_shards > 0`, 4 by default as in RLlib) the buffer is
split over replay shard actors instead (rlx.algorithms.apex_shards): each runner adds its
fragments to its shard itself, the driver sees step counts only, and the learner thread
replays from the shards in turn (`max_requests_in_flight_per_replay_worker` requests queued per
shard) and sends them the new priorities.

Without remote runners (`num_env_runners=0`) the driver's runner samples one fragment, then
the same replay update runs in the driver thread (no concurrency, deterministic with a seed).

Multi-agent: the buffer is OffPolicyAlgorithm's MultiAgentReplayBuffer (one prioritized buffer
per policy, each runner's columns on their own lanes); each round replays one train batch per
trainable policy with data, the MultiAgentLearner updates them, and each policy's buffer gets
its batch's new priorities. A single-agent run is the one-module case of the same round.

`result["apex"]` reports the learner thread's work: updates and replayed env steps this
iteration, their rates, the buffer's fill and the policy lag of the added samples.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from rlx.algorithms.algorithm import state_count
from rlx.algorithms.apex_shards import RUNNER_LANE_STRIDE, ReplayShards, add_to_replay_shard
from rlx.algorithms.config_options import Option, integer, number, seconds
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.off_policy import OffPolicyAlgorithm, OffPolicyConfig
from rlx.core.remote_fragment import RemoteFragment
from rlx.core.sample_batch import MultiAgentBatch
from rlx.env.env_runner_group import AsyncSample
from rlx.utils.errors import ConfigError

# Lanes of a runner's columns in the replay buffer start at runner_index * RUNNER_LANE_STRIDE: a
# multi-agent runner's columns are (sub-env, agent) slots, as many as the agents it has seen.

T = ("training",)


def _requests_limit(name: str, value: Any) -> float:
    """An int >= 1 or infinity (no limit)."""
    if value == float("inf"):
        return float("inf")
    return integer(1)(name, value)


#: Options of both Ape-X variants (RLlib's names). RLlib's `max_requests_in_flight_per_sampler_worker`
#: is the old name of the common `max_requests_in_flight_per_env_runner` (default 2, as Ape-X's).
APEX_OPTIONS = [
    Option("num_replay_buffer_shards", 4, T, integer(0),
           doc="Replay shard actors holding the prioritized replay memory when the EnvRunners are Ray actors "
               "(runners add to them directly; RLlib's optimizer={'num_replay_buffer_shards': N} is read too). "
               "0, or runners that are no Ray actors: one buffer in the driver."),
    Option("max_requests_in_flight_per_replay_worker", float("inf"), T, _requests_limit,
           doc="Replay requests the learner keeps queued per replay shard actor (more than 2 gain nothing: one is "
               "answered while the learner trains on the previous; inf: 2)."),
    Option("timeout_s_sampler_manager", 0.0, T, seconds(),
           doc="Seconds a training step waits for sample results (0: until the first one is ready, while the "
               "learner thread trains on)."),
    Option("timeout_s_replay_manager", 0.0, T, seconds(),
           doc="Seconds to wait for replay-shard actors' results (RLlib).",
           no_effect="rlx's learner thread waits for the replay it trains on next, and does not poll the shards"),
]

#: Defaults of both variants, as RLlib's Ape-X configs set them.
APEX_DEFAULTS: dict[str, Any] = {
    "num_env_runners": 32,
    "rollout_fragment_length": 50,
    "n_step": 3,
    "train_batch_size": 512,
    "target_network_update_freq": 500_000,
    "training_intensity": 1,
    "num_steps_sampled_before_learning_starts": 50_000,
    "replay_buffer_config": {"type": "MultiAgentPrioritizedReplayBuffer", "capacity": 2_000_000,
                             "prioritized_replay_alpha": 0.6, "prioritized_replay_beta": 0.4,
                             "prioritized_replay_eps": 1e-6},
    "min_time_s_per_iteration": 30,
    "min_sample_timesteps_per_iteration": 25_000,
}


class ApexConfig(OffPolicyConfig):
    """Ape-X's options and RLlib's Ape-X defaults, shared by ApexDQNConfig and ApexDDPGConfig
    (each puts it before its base algorithm's config: `ApexDQNConfig(ApexConfig, DQNConfig)`)."""

    _extra_options = APEX_OPTIONS
    _default_overrides = APEX_DEFAULTS
    #: Runs on each remote EnvRunner with every asynchronous fragment: adds it to the runner's
    #: replay shard, once the driver gave it one (rlx.algorithms.apex_shards).
    runner_fragment_hook = staticmethod(add_to_replay_shard)

    def validate(self) -> None:
        """Ape-X's checks (a prioritized buffer, a training_intensity), then the base algorithm's.
        RLlib's `optimizer={"num_replay_buffer_shards": N}` becomes num_replay_buffer_shards."""
        v = self._values
        optimizer = v["optimizer"]
        if isinstance(optimizer, dict) and "num_replay_buffer_shards" in optimizer:
            optimizer = dict(optimizer)
            v["num_replay_buffer_shards"] = integer(0)("num_replay_buffer_shards",
                                                       optimizer.pop("num_replay_buffer_shards"))
            v["optimizer"] = optimizer
        rb = v["replay_buffer_config"]
        if "Prioritized" not in str(rb.get("type", "")) and not rb.get("prioritized_replay", False):
            raise ConfigError(f"Ape-X replays by priority: replay_buffer_config type {rb.get('type')!r} is not a "
                              "prioritized buffer; use 'MultiAgentPrioritizedReplayBuffer' (or "
                              "'PrioritizedReplayBuffer').")
        if v["training_intensity"] is None:
            raise ConfigError("Ape-X needs training_intensity (replayed env steps per sampled env step), e.g. 1.")
        super().validate()


class ApexLearnerThread(threading.Thread):
    """Replays prioritized train batches and updates the learner while the runners sample.

    `algo.apex_update()` does one replay-update-priorities round; the thread calls it while
    `algo.apex_update_due()` says the learner is behind `training_intensity`, and waits for
    new samples otherwise. `pause()` returns once the update in progress finished.
    """

    def __init__(self, algo: "ApexMixin"):
        super().__init__(name="rlx-apex-learner", daemon=True)
        self.algo = algo
        self.lock = threading.Lock()  # held during an update
        self._running = threading.Event()
        self._stopped = False
        self._wake = threading.Condition()
        self.error: BaseException | None = None
        #: Updates and replayed env steps since the last `take_counts()`, and the time spent updating.
        self.num_updates = 0
        self.update_time_s = 0.0

    def resume(self) -> None:
        """Let the thread update (starting it the first time)."""
        self._running.set()
        if not self.is_alive() and not self._stopped:
            self.start()
        self.notify()

    def notify(self) -> None:
        """New samples arrived: wake a waiting thread."""
        with self._wake:
            self._wake.notify()

    def pause(self) -> None:
        """Stop updating; returns after the update in progress finished."""
        self._running.clear()
        with self.lock:
            pass

    def stop(self) -> None:
        """End the thread."""
        self._stopped = True
        self._running.set()
        self.notify()
        if self.is_alive():
            self.join(timeout=30)

    def run(self) -> None:  # noqa: D102
        algo = self.algo
        while not self._stopped:
            self._running.wait()
            if self._stopped:
                return
            with self.lock:
                due = self._running.is_set() and algo.apex_update_due()
                if due:
                    started = time.perf_counter()
                    try:
                        algo.apex_update()
                    except BaseException as err:  # handed to the driver's next training step
                        self.error = err
                        self._running.clear()
                        continue
                    self.update_time_s += time.perf_counter() - started
                    self.num_updates += 1
            if not due:
                with self._wake:
                    self._wake.wait(timeout=0.05)


class _LockedWeights:
    """The learner's weights read under the learner thread's lock (never half-updated)."""

    def __init__(self, learner: Any, lock: threading.Lock):
        self.learner, self.lock = learner, lock
        self.module = getattr(learner, "module", None)  # the local runner shares it: nothing to copy

    def get_weights(self) -> Any:
        with self.lock:
            return self.learner.get_weights()

    def __getattr__(self, name: str) -> Any:
        # What else a weight source says about itself (e.g. whether it holds several modules).
        if name.startswith("__") or name in ("learner", "lock", "module"):
            raise AttributeError(name)
        return getattr(self.learner, name)


class ApexMixin(OffPolicyAlgorithm):
    """Ape-X's training step for an off-policy Algorithm (DQN, DDPG): put it first in the bases
    (`class ApexDQN(ApexMixin, DQN)`: the algorithm's own class comes next in the MRO)."""

    def setup(self, config: AlgorithmConfig) -> None:
        """Build the off-policy parts, then the learner thread (started on the first training step)."""
        super().setup(config)
        self._buffer_lock = threading.Lock()
        self._learner_thread = ApexLearnerThread(self)
        self._replayed_steps = 0
        self._last_learner_metrics: dict[str, Any] = {}
        self._apex_iteration_start = (time.perf_counter(), 0, 0.0)
        #: The replay shard actors (None: the replay buffer is the driver's local_replay_buffer).
        self.replay_shards: ReplayShards | None = self._make_replay_shards()

    def _make_replay_shards(self) -> ReplayShards | None:
        """Start num_replay_buffer_shards shard actors and give each Ray runner its shard, when the
        remote runners are Ray actors; else None."""
        cfg = self.config
        group = self.env_runner_group
        if not cfg.num_replay_buffer_shards or group.num_remote_env_runners() == 0 or group.backend != "ray":
            return None
        if cfg.store_buffer_in_checkpoints:
            raise ConfigError("store_buffer_in_checkpoints=True is not supported with Ape-X's replay shard actors "
                              "(num_replay_buffer_shards > 0 on Ray EnvRunners): set num_replay_buffer_shards=0 to "
                              "keep the buffer in the driver, where checkpoints can store it.")
        several = self.learners.sole_module_id is None
        configs = {pid: dict(cfg.get_config_for_module(pid).replay_buffer_config) for pid in self.policy_ids} \
            if several else None
        seed = None if cfg.seed is None else int(cfg.seed) + 17
        shards = ReplayShards(cfg.num_replay_buffer_shards, configs, dict(cfg.replay_buffer_config), seed,
                              cfg.max_requests_in_flight_per_replay_worker)
        for handle in group.remote_workers():
            shards.assign(handle)
        return shards

    # ---------------------------------------------------------------- the learner's side

    def apex_update_due(self) -> bool:
        """Whether the learner may take another train batch: the replayed steps stay at or below
        training_intensity times the steps sampled since num_steps_sampled_before_learning_starts
        (as in the synchronous off-policy step)."""
        cfg = self.config
        since_start = self._counters["num_env_steps_sampled_lifetime"] - cfg.num_steps_sampled_before_learning_starts
        if since_start < 0:
            return False
        return self._replayed_steps + cfg.total_train_batch_size <= since_start * float(cfg.training_intensity)

    def apex_update(self) -> None:
        """Replay one prioritized train batch per trainable policy, update on them, write their
        new priorities back to their buffers (or replay shard)."""
        cfg = self.config
        low, high = cfg.n_step_range
        batch_size = cfg.total_train_batch_size
        replays: dict[str, Any] = {}
        shards = self.replay_shards
        with self._buffer_lock:
            n = low if low == high else int(self._n_step_rng.integers(low, high + 1))
            buffers = self.module_replay_buffers() if shards is None else {}
            for module_id, buffer in buffers.items():
                if not len(buffer) or not self.learners.is_trainable(module_id):
                    continue
                module_cfg = cfg.get_config_for_module(module_id)
                replays[module_id] = buffer.sample(module_cfg.total_train_batch_size, n_step=n, gamma=module_cfg.gamma)
        shard_index = -1
        if shards is not None:
            requests = {}
            for module_id in self.learners.keys():
                if self.learners.is_trainable(module_id):
                    module_cfg = cfg.get_config_for_module(module_id) if self.learners.sole_module_id is None else cfg
                    requests[module_id] = (module_cfg.total_train_batch_size, float(module_cfg.gamma))
            shard_index, replays = shards.next_replay(requests, n)
        replays = {module_id: self._replay_hook(replay) for module_id, replay in replays.items()}
        metrics: dict[str, Any] = {}
        if replays:
            timestep = self._counters["num_env_steps_sampled_lifetime"]
            batch = MultiAgentBatch(replays, env_steps=batch_size)
            metrics = self.module_results(self.learn_on_batch(batch, timestep=timestep))
        priorities = {}
        for module_id, module_metrics in metrics.items():
            td_error = module_metrics.pop("td_error", None)
            if td_error is not None:
                priorities[module_id] = (replays[module_id]["batch_indexes"], td_error)
        if shards is not None:
            shards.update_priorities(shard_index, priorities)
        else:
            with self._buffer_lock:
                for module_id, (indexes, td_error) in priorities.items():
                    buffers[module_id].update_priorities(indexes, td_error)
        # A round counts even when no policy trained (policies_to_train), so the intensity check ends.
        self._replayed_steps += batch_size
        self._counters["num_env_steps_trained_lifetime"] += batch_size
        self._counters["num_agent_steps_trained_lifetime"] += batch_size * len(replays)
        if metrics:
            self._last_learner_metrics = metrics

    # ---------------------------------------------------------------- the driver's side

    def train(self) -> dict[str, Any]:
        """One iteration (Algorithm.train), with the learner thread paused afterwards."""
        try:
            return super().train()
        finally:
            self._learner_thread.pause()

    def evaluate(self) -> dict[str, Any]:
        """Algorithm.evaluate, with the learner thread paused (the evaluated weights hold still)."""
        self._learner_thread.pause()
        return super().evaluate()

    def training_step(self) -> dict[str, Any]:
        """Add the fragments the runners finished to the buffer; the learner thread trains on
        meanwhile (without remote runners: sample one fragment, then update here)."""
        thread = self._learner_thread
        if thread.error is not None:
            error, thread.error = thread.error, None
            raise error
        cfg = self.config
        group = self.env_runner_group
        remote = group.num_remote_env_runners() > 0
        if remote:
            thread.resume()
        # Waiting for the first finished fragment releases the GIL to the learner thread.
        samples = group.async_sample(
            weights_from=_LockedWeights(self.learner, thread.lock), weights_seq_no=self.weights_version,
            global_vars={"timestep": self._counters["num_env_steps_sampled_lifetime"]},
            wait_s=(cfg.timeout_s_sampler_manager or None) if remote else None)
        self._add_samples(samples)
        if not remote:
            while self.apex_update_due():
                started = time.perf_counter()
                self.apex_update()
                thread.update_time_s += time.perf_counter() - started
                thread.num_updates += 1
        elif samples:
            thread.notify()
        self._log_apex_metrics()
        with thread.lock:
            metrics = dict(self._last_learner_metrics)
        return {module_id: {k: float(v) for k, v in module_metrics.items() if np.ndim(v) == 0}
                for module_id, module_metrics in metrics.items()}

    def _add_samples(self, samples: list[AsyncSample]) -> None:
        """Count the fragments and add them to the buffer, each runner's sub-envs on its own lanes."""
        group = self.env_runner_group
        resets = group.num_resets
        shards = self.replay_shards
        with self._buffer_lock:
            if resets != self._runner_resets:
                # A runner restarted its episodes: its lanes' open episodes do not continue.
                if shards is None:
                    self.local_replay_buffer.end_open_episodes()
                else:
                    shards.end_open_episodes()
                self._runner_resets = resets
            for sample in samples:
                self.count_sampled(sample.batch)
                if isinstance(sample.batch, RemoteFragment):
                    pass  # the runner added it to its replay shard
                elif shards is not None and sample.runner_index > 0:
                    # A runner without its shard (new, or rebuilt) or what a failed one left: add it
                    # for the runner, and tell the runner its shard (again).
                    shards.add(sample.batch, sample.runner_index)
                    self._assign_shard(shards, sample.runner_index)
                else:
                    self.local_replay_buffer.add(sample.batch, time_major=True,
                                                 lane_offset=sample.runner_index * RUNNER_LANE_STRIDE)
                lag = self.weights_version - sample.weights_seq_no
                self.metrics.log_value(("apex", "policy_lag_mean"), float(lag), window=100_000, clear_on_reduce=True)

    def _assign_shard(self, shards: ReplayShards, runner_index: int) -> None:
        for handle in self.env_runner_group.remote_workers():
            if handle.index == runner_index and handle.healthy:
                shards.assign(handle)

    def _log_apex_metrics(self) -> None:
        thread = self._learner_thread
        started, updates_before, time_before = self._apex_iteration_start
        elapsed = max(time.perf_counter() - started, 1e-9)
        updates = thread.num_updates - updates_before
        section = "apex"
        batch = self.config.total_train_batch_size
        self.metrics.log_value((section, "num_learner_updates"), updates, window=1)
        self.metrics.log_value((section, "num_env_steps_replayed"), updates * batch, window=1)
        self.metrics.log_value((section, "learner_updates_per_s"), updates / elapsed, window=1)
        self.metrics.log_value((section, "env_steps_replayed_per_s"), updates * batch / elapsed, window=1)
        busy = thread.update_time_s - time_before
        self.metrics.log_value((section, "learner_busy_fraction"), min(1.0, busy / elapsed), window=1)
        size = len(self.local_replay_buffer) if self.replay_shards is None else self.replay_shards.size()
        self.metrics.log_value((section, "replay_buffer_size"), size, window=1)
        if self.replay_shards is not None:
            self.metrics.log_value((section, "num_replay_shards"), len(self.replay_shards.shards), window=1)
        self.metrics.log_value((section, "sample_requests_in_flight"),
                               self.env_runner_group.num_sample_requests_in_flight(), window=1)

    def _build_result(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        result = super()._build_result(*args, **kwargs)
        thread = self._learner_thread
        self._apex_iteration_start = (time.perf_counter(), thread.num_updates, thread.update_time_s)
        return result

    # ---------------------------------------------------------------- state and lifecycle

    def get_state(self) -> dict[str, Any]:
        """Off-policy state plus the replayed-step count (the learner thread is paused between train() calls)."""
        with self._learner_thread.lock:
            state = super().get_state()  # type: ignore[misc]
            state["apex_replayed_steps"] = int(self._replayed_steps)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state()."""
        with self._learner_thread.lock:
            super().set_state(state)  # type: ignore[misc]
            if "apex_replayed_steps" in state:
                self._replayed_steps = state_count(state, "apex_replayed_steps")

    def stop(self) -> None:
        """Stop the learner thread, then everything else."""
        thread = getattr(self, "_learner_thread", None)
        if thread is not None:
            thread.stop()
        shards = getattr(self, "replay_shards", None)
        if shards is not None:
            shards.stop()
        super().stop()  # type: ignore[misc]
