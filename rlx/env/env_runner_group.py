"""EnvRunnerGroup: the local EnvRunner plus (later) remote ones, behind one interface.

The Algorithm only talks to the group: `sample()`, `sync_weights()`, `get_metrics()`,
`foreach_env_runner()`. Remote backends (worker processes, Ray actors) implement the
same methods, so algorithms never know where their runners live.

This module holds the group's lifecycle and API; the jobs behind them live in
rlx.env.runner_group (backends, calls shipped to runners, synchronous and asynchronous
sampling, weight and filter sync, stuck runners, replacing runners, foreach). The names that
moved there still import from here.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import AbstractSet, Any, Callable

import numpy as np

from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec
from rlx.env.config_view import EnvConfig
from rlx.env.env_runner import EnvInfo, SingleAgentEnvRunner
from rlx.env.partial_fragment import PartialFragment, take_partial_fragment
from rlx.env.runner_group import foreach, replacement, weight_sync
from rlx.env.runner_group.async_sampling import AsyncSample, AsyncSampler
from rlx.env.runner_group.batches import concat_batches, env_steps_of, join_runner_batches, num_sampled_steps
from rlx.env.runner_group.episodes import runners_return_episodes, sample_episodes
from rlx.env.runner_group.backends import (BACKENDS, call_all, make_remote_runner, resolve_backend, run_all,
                                           runner_factory, wait_for_builds)
from rlx.env.runner_group.calls import (AsyncSampleCall, RestoreCall, SampleCall, SetFilterCall, SetWeightsCall,
                                        env_info, get_metrics, pop_filter_delta)
from rlx.env.runner_group.local_sampling import sample_local, sampling_local_runner
from rlx.env.runner_group.sampling import sample_remote
from rlx.env.runner_group.spares import SpareWorker
from rlx.env.runner_group.stuck_runners import LocalSampleBound
from rlx.env.runner.worker_view import with_worker_view, worker_view
from rlx.env.runner_host import RunnerFactory
from rlx.env.runner_restarts import RunnerSupervisor
from rlx.env.threaded_env_runner import ThreadedEnvRunner
from rlx.utils.registry import import_object

__all__ = ["AsyncSample", "BACKENDS", "EnvRunnerGroup", "concat_batches", "join_runner_batches",
           "num_sampled_steps", "resolve_backend", "run_all"]

# The calls shipped to remote runners, at the names they had here (pickled by reference).
_SampleCall, _AsyncSampleCall, _SetWeightsCall, _RestoreCall, _SetFilterCall = \
    SampleCall, AsyncSampleCall, SetWeightsCall, RestoreCall, SetFilterCall
_env_info, _get_metrics, _pop_filter_delta = env_info, get_metrics, pop_filter_delta


class EnvRunnerGroup:
    """A local EnvRunner (index 0) and any remote EnvRunners (indices 1..N).

    Args:
        config: the frozen AlgorithmConfig (`num_env_runners` remote runners).
        module_spec: spec to build each runner's module from.
        module: a module for the local runner to share (the local Learner's).
        local_env_runner: whether to create the local runner. A group with no remote
            runners always has one.
        remote_backend: where remote runners live: "process" (worker processes on this
            machine), "ray" (Ray actors, on a cluster too), "thread" (threads of this
            process; evaluation uses them), or None to take the config's
            `env_runner_backend` ("auto": Ray when `ray.is_initialized()`, else processes).
        placement_bundle_offset: inside a Ray Tune trial, the Ray runners take the trial's
            bundles from `placement_bundle_offset + 1` on (evaluation runners come after the
            training runners: their offset is num_env_runners).

    With remote runners the local runner does not sample: `sample()` asks every remote runner
    in service for its share in parallel and joins the answers side by side. Failed runners
    are restarted beside sampling, as the fault-tolerance settings say (rlx.env.runner_restarts).
    """

    def __init__(
        self,
        config: EnvConfig,
        module_spec: RLModuleSpec | None = None,
        module: RLModule | None = None,
        local_env_runner: bool = True,
        remote_backend: str | None = "thread",
        runner_cls: Any = None,
        placement_bundle_offset: int = 0,
    ):
        self.config = config
        self._bundle_offset = int(placement_bundle_offset)
        self._module_spec = module_spec
        runner_cls = runner_cls or config.env_runner_cls or SingleAgentEnvRunner
        if isinstance(runner_cls, str):
            runner_cls = import_object(runner_cls)
        self._runner_cls = runner_cls
        num_remote = int(config.num_env_runners)
        self.backend = resolve_backend(remote_backend if remote_backend is not None else config.env_runner_backend)
        self._local_env_runner = None
        self._local_module = module
        self.num_remote_worker_restarts = 0
        #: Increases whenever the layout of sampled batches changes (runners added, lost or
        #: reset all their episodes): replay buffers end their open episodes then.
        self.num_resets = 0
        self._sampling_layout: tuple = ()
        self._runner_resets: dict[int, int] = {}
        self._sent_weights: dict[int, Any] = {}
        self._remote: list[Any] = []
        #: A started worker process for the next restart of a runner whose process died.
        self._spare = SpareWorker(self.backend, runner_cls, config, module_spec)
        #: Threads stopping replaced runners' workers (stop() waits for them).
        self._retiring: list[Any] = []
        #: Metrics of runners that failed, from the partial fragments they left (get_metrics()).
        self._salvaged_metrics: list[dict[str, Any]] = []
        #: sample_timeout_s for the local runner (it samples on its own thread, see LocalSampleBound).
        self._local_bound = LocalSampleBound(config.sample_timeout_s, config.batch_mode)
        #: Asynchronous sampling (async_sample): the requests in flight per remote runner.
        self._async = AsyncSampler(self)
        self._in_flight = self._async.in_flight  # the same dict, under the name it had here
        wants_local = local_env_runner or num_remote == 0
        # The driver's runner builds sub-envs only where it samples or was asked to
        # (create_env_on_local_worker); otherwise it takes the spaces from remote runner 1.
        local_envs = num_remote == 0 or config.create_env_on_local_worker \
            or not issubclass(runner_cls, SingleAgentEnvRunner)
        try:
            if wants_local and local_envs:
                self._local_env_runner = self._make_local()
            for i in range(1, num_remote + 1):
                # One at a time, so stop() below reaches the runners started before one that fails.
                self._remote.append(self._make_remote(i))
            validate = config.validate_env_runners_after_construction
            tolerated = config.restart_failed_env_runners or config.ignore_env_runner_failures
            build_errors = wait_for_builds(self._remote, tolerated) if validate else {}
            if wants_local and not local_envs:
                self._local_env_runner = self._make_local(env_info=self._built_remote().submit(env_info).result())
            #: Sub-envs per runner, as the runners resolved config.num_envs_per_env_runner.
            self.num_envs_per_env_runner = self._resolved_num_envs()
            self._sync_new_remotes(wait=validate, skip=set(build_errors))
            #: Failures and restarts of the remote runners (rlx.env.runner_restarts).
            self._ft = RunnerSupervisor(self)
            for index, err in build_errors.items():  # restarted, or dropped with ignore_env_runner_failures
                self._ft.failed(self._remote[index - 1], err, worker_kept=False)
            # Started after the runners were built, so it does not slow their builds down.
            self._spare.replenish()
        except BaseException:
            self.stop()
            raise

    def _make_local(self, env_info: Any = None) -> Any:
        obs_space, action_space = self.config.observation_space, self.config.action_space
        if env_info is None and self.config.env is None and issubclass(self._runner_cls, SingleAgentEnvRunner) \
                and obs_space is not None and action_space is not None:
            # env=None with observation_space/action_space: a runner without sub-envs (external envs);
            # without the spaces, the runner's attempt to create its env says what is missing.
            env_info = EnvInfo(obs_space, action_space, 1, False)
        kwargs = {} if env_info is None else {"env_info": env_info}
        return self._runner_cls(config=self.config, worker_index=0, num_workers=int(self.config.num_env_runners),
                                module_spec=self._module_spec, module=self._local_module, **kwargs)

    def _built_remote(self) -> Any:
        """The first remote runner that was built (one whose build failed does not answer)."""
        return next((h for h in self._remote if not h.ready.done() or h.ready.exception() is None), self._remote[0])

    def _resolved_num_envs(self) -> int:
        runner = self._local_env_runner
        if runner is not None:
            return int(getattr(runner, "num_envs", self.config.num_envs_per_env_runner))
        if issubclass(self._runner_cls, SingleAgentEnvRunner):
            return int(self._built_remote().submit(env_info).result().num_envs)
        return int(self.config.num_envs_per_env_runner)

    def _sync_new_remotes(self, wait: bool = True, skip: AbstractSet[int] = frozenset()) -> None:
        """Give freshly built remote runners the local runner's weights and state (weight_sync)."""
        weight_sync.sync_new_remotes(self, wait=wait, skip=skip)

    def _runner_factory(self, index: int) -> RunnerFactory:
        """What builds remote runner `index` (shipped to its worker for a restart in place)."""
        return runner_factory(self._runner_cls, self.config, index, self._module_spec)

    def _make_remote(self, index: int, build_in_background: bool = False) -> Any:
        """A handle on a new remote runner `index` on the group's backend (backends.make_remote_runner)."""
        return make_remote_runner(self.backend, self._runner_cls, self.config, index, self._module_spec,
                                  build_in_background=build_in_background, bundle_offset=self._bundle_offset)

    # ------------------------------------------------------------ runners

    @property
    def local_env_runner(self) -> SingleAgentEnvRunner | None:
        """The EnvRunner in this process (None when the group has only remote runners)."""
        return self._local_env_runner

    def local_worker(self) -> Any:
        """The old-API view of `local_env_runner` (rlx.env.runner.worker_view): the same runner,
        whose `sample()` returns RLlib's flat SampleBatch (MultiAgentBatch) as a RolloutWorker does."""
        return worker_view(self._local_env_runner)

    def num_remote_env_runners(self) -> int:
        """Number of remote EnvRunners."""
        return len(self._remote)

    num_remote_workers = num_remote_env_runners

    def num_healthy_remote_workers(self) -> int:
        """Number of remote EnvRunners in service (alive, and not failed or being restarted)."""
        return len(self._ft.up_handles())

    num_healthy_remote_env_runners = num_healthy_remote_workers

    def healthy_worker_ids(self) -> list[int]:
        """Indices of the remote EnvRunners in service."""
        return [r.index for r in self._ft.up_handles()]

    healthy_env_runner_ids = healthy_worker_ids

    def remote_workers(self) -> list[Any]:
        """Remote EnvRunner handles (old API)."""
        return list(self._remote)

    def runner_handles(self) -> list[ThreadedEnvRunner]:
        """Handles that run calls concurrently: the remote runners, or (with none) the local one
        wrapped in its own thread. Evaluation schedules its work on these."""
        if self._remote:
            return list(self._remote)
        if not hasattr(self, "_local_handle"):
            self._local_handle = ThreadedEnvRunner(self._local_env_runner, 0)
        return [self._local_handle]

    def runners_in_service(self) -> list[Any]:
        """The `runner_handles()` in service now, after taking into service the restarted runners
        built meanwhile (never waits): the healthy remote runners, or the local runner's handle."""
        if not self._remote:
            return [h for h in self.runner_handles() if h.healthy]
        self._ft.advance()
        return self._ft.up_handles()

    def restart_failed_runners(self) -> None:
        """Start restarting the remote runners found failed (a call on them raised, or they
        died), or drop them, or raise, as the fault-tolerance settings say. Returns at once: the
        restarts run in the background and the runners join once built (`runners_in_service`)."""
        self._ft.advance()

    def runner_delivered(self, index: int) -> None:
        """Remote runner `index` finished work (an evaluation unit): its next failure counts as a
        first one again (restart back-off and num_consecutive_env_runner_failures_tolerance)."""
        self._ft.delivered(index)

    def recreate_runner(self, index: int, timeout: float | None = None) -> None:
        """Replace remote runner `index` (or the local one, 0) by a freshly built one, waiting
        at most `timeout` seconds for a remote one to be built."""
        replacement.recreate_runner(self, index, timeout)

    # ------------------------------------------------------------ foreach

    def foreach_env_runner(
        self,
        func: Callable[[Any], Any],
        local_env_runner: bool = True,
        healthy_only: bool = True,
        remote_worker_ids: list[int] | None = None,
        timeout_seconds: float | None = None,
    ) -> list[Any]:
        """Apply `func(runner)` to each runner (local first, then remote ones concurrently) and
        return the results as a list."""
        return foreach.foreach_runner(self, func, local_env_runner, healthy_only, remote_worker_ids, timeout_seconds)

    def foreach_worker(self, func: Callable[[Any], Any], local_worker: bool = True, **kwargs: Any) -> list[Any]:
        """Old name of `foreach_env_runner`: `func` gets each runner's old-API worker view."""
        return self.foreach_env_runner(with_worker_view(func), local_env_runner=local_worker, **kwargs)

    def foreach_env_runner_with_id(self, func: Callable[[int, Any], Any], local_env_runner: bool = True) -> list[Any]:
        """Apply `func(index, runner)` to each runner in service."""
        return foreach.foreach_runner_with_id(self, func, local_env_runner)

    def foreach_worker_with_id(self, func: Callable[[int, Any], Any], local_worker: bool = True) -> list[Any]:
        """Old name of `foreach_env_runner_with_id`: `func(index, worker view)` of each runner in service."""
        return self.foreach_env_runner_with_id(with_worker_view(func, 1), local_env_runner=local_worker)

    def foreach_worker_with_index(self, func: Callable[[int, Any], Any], local_worker: bool = True) -> list[Any]:
        """Apply `func(index, runner)` to each runner, as seed 003 shows (`lambda _id, worker: ...`).
        Older RLlib passed `(worker, index)`: a function whose parameters are named that way (the first
        one a worker, e.g. `lambda ev, i: ...`) still gets them in that order."""
        if foreach.worker_first(func):
            viewed = with_worker_view(func)
            return self.foreach_env_runner_with_id(lambda i, r: viewed(r, i), local_env_runner=local_worker)
        return self.foreach_env_runner_with_id(with_worker_view(func, 1), local_env_runner=local_worker)

    # ------------------------------------------------------------ data

    #: The Algorithm's offline input and output (rlx.offline.offline_io.OfflineIO), or None.
    offline_io: Any = None

    def sample(self, num_timesteps: int | None = None, explore: bool | None = None) -> Any:
        """Collect at least `num_timesteps` env steps (one fragment per runner when None) as one batch.

        Without remote runners the local runner samples. With them, every healthy remote
        runner samples its share in parallel; their time-major batches are joined along
        the sub-env axis, so each column stays one sub-env's trajectory. With offline settings
        (`input_`, `output`) the group's `offline_io` reads the batch from the input instead,
        and writes every batch returned to the output. When the runners return episodes (the
        runners of a custom Algorithm's `training_step`, or of a group built from a config
        alone), the joined list of all runners' episodes (rlx.env.runner_group.episodes).
        """
        if self.offline_io is not None:
            return self.offline_io.sample(num_timesteps, explore, self._sample_envs)
        if runners_return_episodes(self):  # a custom training_step, or a group built from a config alone
            return sample_episodes(self, num_timesteps, explore)
        return self._sample_envs(num_timesteps, explore)

    def _sample_envs(self, num_timesteps: int | None, explore: bool | None) -> dict[str, np.ndarray]:
        """`sample()` from the envs: the local runner, or every remote runner in service
        (rlx.env.runner_group.sampling), their batches joined side by side."""
        if not self._remote:
            return sample_local(self, num_timesteps, explore)
        per_runner = sample_remote(self, num_timesteps, explore)
        layout = tuple(sorted(per_runner))
        if layout != self._sampling_layout:
            if self._sampling_layout:
                self.num_resets += 1
            self._sampling_layout = layout
        weight_sync.merge_filters(self, layout)
        return join_runner_batches([concat_batches(per_runner[i]) for i in layout])

    def _count_steps(self, batch: Any) -> int:
        """Steps in a sampled batch, as count_steps_by says."""
        return num_sampled_steps(batch, self.config.count_steps_by)

    def _note_resets(self, index: int, resets: int) -> None:
        """Runner `index` reports `resets` (its reset count): a change starts a new layout."""
        if self._runner_resets.get(index, resets) != resets:
            self.num_resets += 1
        self._runner_resets[index] = resets

    def _compresses_observations(self) -> bool:
        """Whether remote runners send their observations compressed (compress_observations; not
        for threads, whose batches never leave this process)."""
        return bool(self.config.compress_observations) and self.backend != "thread"

    def async_sample(self, *, explore: bool | None = None, weights_from: Any = None,
                     weights_seq_no: int | None = None, global_vars: dict | None = None,
                     max_new_requests: int | None = None, wait_s: float | None = None) -> list[AsyncSample]:
        """Asynchronous sampling (IMPALA, APPO): return the sample() results that are ready and
        keep the remote runners sampling while the caller trains.

        Every healthy remote runner has up to `max_requests_in_flight_per_env_runner` sample()
        requests (one fragment each) queued. This call waits up to `wait_s` seconds (default:
        until the first result, at most `sample_timeout_s`) and returns every finished result as
        an AsyncSample that names the version of the weights it was sampled with. Before a runner
        gets its next request it gets the weights of `weights_from` (a Learner) when its own are
        older than `weights_seq_no`, and the merged observation filter; a runner that delivered
        gets its next request before this call returns, so it samples on while the caller trains.
        `max_new_requests` caps the requests this call queues (the caller's queue has room for
        that many more fragments; 0: none): back pressure, so the runners run at most one
        queue's worth ahead of the learner. None: every runner's queue is filled.

        Without remote runners, the local runner samples one fragment here (its module is the
        learner's: no lag).
        """
        if self.offline_io is not None:  # output: write every batch; input_: refused here
            self.offline_io.check_sampling_mode("asynchronous sampling (IMPALA, APPO)")
        if self._remote:
            samples = self._async.sample(explore, weights_from, weights_seq_no, global_vars, max_new_requests, wait_s)
        else:
            local = sampling_local_runner(self)
            if weights_from is not None and weights_seq_no is not None and local.weights_seq_no != weights_seq_no:
                self.sync_weights(from_worker_or_learner_group=weights_from, weights_seq_no=weights_seq_no)
            batch = sample_local(self, None, explore)
            samples = [AsyncSample(batch, 0, int(local.weights_seq_no), self._count_steps(batch))]
        if self.offline_io is not None:
            for sample in samples:
                self.offline_io.write_sampled(sample.batch, runner_index=sample.runner_index)
        return samples

    def num_sample_requests_in_flight(self) -> int:
        """Asynchronous sample() requests queued or running on the remote runners."""
        return self._async.num_in_flight()

    # ------------------------------------------------------------ fault tolerance

    def num_remote_workers_waiting_for_restart(self) -> int:
        """Number of failed remote EnvRunners that will be back: waiting out their restart delay
        or being rebuilt (the runners in service sample meanwhile)."""
        return self._ft.num_waiting_for_restart()

    def probe_unhealthy_env_runners(self, timeout_seconds: float | None = None) -> list[int]:
        """Restart every failed remote EnvRunner now (without waiting out restart delays), wait up
        to `timeout_seconds` (default env_runner_health_probe_timeout_s) for them to be built, and
        return the indices of those back in service."""
        return self._ft.probe(timeout_seconds)

    probe_unhealthy_workers = probe_unhealthy_env_runners

    def take_restarted_indices(self) -> list[int]:
        """Indices of the runners restarted since the last call (for on_env_runners_recreated)."""
        return self._ft.take_restarted()

    def _call_all(self, handles: list[Any], fn: Callable[[Any], Any], timeout: float | None = None,
                  what: str = "call") -> dict[int, Any]:
        """Run `fn` on every handle in parallel; {index: result} of those that answered within
        `timeout` seconds. The others go to the supervisor, which restarts or drops them, or
        raises, as the fault-tolerance settings say."""
        out, failures = call_all(handles, fn, timeout, what, self.config.batch_mode)
        for handle, err, hung in failures:
            self._ft.failed(handle, err, hung=hung)
        return out

    def _salvage(self, handle: Any, err: BaseException) -> PartialFragment | None:
        """The rows runner `handle` sampled before `err` ended its sample() call (counting as
        progress: its failure is then a first one), with its metrics kept for get_metrics()."""
        fragment = take_partial_fragment(err)
        if fragment is None:
            return None
        self._salvaged_metrics.append(fragment.metrics)
        fragment.metrics = {}
        if not env_steps_of(fragment.batch):
            return None
        self._ft.delivered(handle.index)
        return fragment

    def _forget_requests(self, index: int) -> None:
        """Drop the asynchronous sample() requests queued on runner `index` (it failed)."""
        self._async.forget(index)

    def _start_replacement(self, index: int, in_place: bool) -> Future:
        """Start restarting runner `index` for the supervisor (replacement.start_replacement)."""
        return replacement.start_replacement(self, index, in_place)

    def _runner_restarted(self, index: int) -> Future | None:
        """Runner `index` was rebuilt: bring it up to date (replacement.runner_restarted)."""
        return replacement.runner_restarted(self, index)

    # ------------------------------------------------------------ metrics, weights, filters

    def get_metrics(self) -> list[dict[str, Any]]:
        """Each runner's metrics since the last call (dicts of Stats, see EnvRunner.get_metrics)."""
        out = []
        if self._local_env_runner is not None:
            out.append(self._local_env_runner.get_metrics())
        # Runners that failed: the episodes they completed before, from their partial fragments.
        out.extend(self._salvaged_metrics)
        self._salvaged_metrics = []
        if self._async.active():
            # Sampling asynchronously: the runners' metrics came back with their samples (asking a
            # runner now would wait for the sample it is busy with).
            out.extend(self._async.take_metrics())
            return out
        healthy = self._ft.up_handles()
        if healthy:
            answers = self._call_all(healthy, get_metrics, timeout=self.config.metrics_episode_collection_timeout_s,
                                     what="get_metrics()")
            out.extend(answers[h.index] for h in healthy if h.index in answers)
        return out

    def sync_weights(
        self,
        policies: list[str] | None = None,
        from_worker_or_learner_group: Any = None,
        to_worker_indices: list[int] | None = None,
        global_vars: dict | None = None,
        inference_only: bool = False,
        weights_seq_no: int | None = None,
    ) -> None:
        """Push weights from the learner (or a given source) to the runners.

        A runner that shares its module with the source needs no copy. With
        `weights_seq_no`, a remote runner that already has that version is skipped, so
        weights travel only when they changed. Remote runners that are still busy (e.g.
        stuck in a slow env) are skipped; they get the next sync.
        """
        if from_worker_or_learner_group is None:
            # RLlib's no-argument form: push the local runner's weights to the remote ones.
            from_worker_or_learner_group = self._local_env_runner
            if from_worker_or_learner_group is None:
                raise ValueError("sync_weights() without a source needs a local EnvRunner; pass "
                                 "from_worker_or_learner_group=algo.learner_group (or a runner).")
        weight_sync.sync_weights(self, from_worker_or_learner_group, to_worker_indices, global_vars, weights_seq_no)

    def sync_filters(self, source: Any) -> None:
        """Copy the observation filter state of `source` (an EnvRunner) to every idle runner
        (remote processes and actors get it queued as a call)."""
        weight_sync.sync_filters(self, source)

    def idle_runners(self) -> list[Any]:
        """The in-process runners that can take a call now: the local one and every healthy
        threaded one not busy (runners in other processes are reached with foreach_env_runner)."""
        local_handle = getattr(self, "_local_handle", None)
        local_free = self._local_env_runner is not None and not (local_handle is not None and local_handle.busy)
        runners = [self._local_env_runner] if local_free else []
        runners.extend(h.runner for h in self._remote
                       if isinstance(h, ThreadedEnvRunner) and self._ft.is_up(h) and not h.busy)
        return runners

    def stop(self) -> None:
        """Stop every runner and close its envs (all of them, even when one fails to stop; the
        first such error is raised afterwards)."""
        # Every remote runner is asked first, so that they finish their last call and close their
        # envs side by side; each stop() below then only waits for its own.
        steps: list[Callable[[], Any]] = [handle.request_stop for handle in self._remote if hasattr(handle, "request_stop")]
        steps.append(self._spare.stop)
        steps.extend(handle.stop for handle in self._remote)
        steps.extend(thread.join for thread in self._retiring)
        if hasattr(self, "_local_handle"):
            # Closes the envs once a call still running on the handle's thread has returned.
            steps.append(lambda: self._local_handle.stop(close_runner=True))
        elif self._local_env_runner is not None:
            steps.append(self._local_env_runner.stop)
        run_all(steps)
