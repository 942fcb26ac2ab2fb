"""EnvRunnerGroup: the local EnvRunner plus (later) remote ones, behind one interface.

The Algorithm only talks to the group: `sample()`, `sync_weights()`, `get_metrics()`,
`foreach_env_runner()`. Remote backends (worker processes, Ray actors) implement the
same methods, so algorithms never know where their runners live.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait as wait_futures
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from rlx.core.learner.learner import unwrap_module
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec
from rlx.core.sample_batch import MultiAgentBatch, join_time_major
from rlx.env.batch_compression import compress_observations, decompress_observations
from rlx.env.env_runner import EnvInfo, SingleAgentEnvRunner
from rlx.env.partial_fragment import PartialFragment, take_partial_fragment
from rlx.env.process_env_runner import ProcessEnvRunner
from rlx.env.ray_env_runner import RayEnvRunner
from rlx.env.runner_host import RebuildRunner, RunnerFactory
from rlx.env.runner_restarts import EnvRunnerFailureError, RunnerSupervisor
from rlx.env.threaded_env_runner import ThreadedEnvRunner
from rlx.utils.errors import ConfigError
from rlx.utils.registry import import_object

logger = logging.getLogger("rlx")

BACKENDS = ("process", "ray", "thread")


def resolve_backend(name: str) -> str:
    """The backend `name` stands for: "auto" is "ray" when Ray is initialised, else "process"."""
    if name == "auto":
        ray = sys.modules.get("ray")
        return "ray" if ray is not None and ray.is_initialized() else "process"
    if name not in BACKENDS:
        raise ConfigError(f"Unknown EnvRunner backend {name!r}; use 'auto', {', '.join(repr(b) for b in BACKENDS)}.")
    return name


def concat_batches(batches: list[Any]) -> Any:
    """Join time-major batches of the same sub-envs along the time axis."""
    if isinstance(batches[0], MultiAgentBatch):
        return MultiAgentBatch.concat_time(batches)
    return join_time_major(batches, axis=0)


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

    With remote runners the local runner does not sample: `sample()` asks every remote runner
    in service for its share in parallel and joins the answers side by side. Failed runners
    are restarted beside sampling, as the fault-tolerance settings say (rlx.env.runner_restarts).
    """

    def __init__(
        self,
        config: Any,
        module_spec: RLModuleSpec | None = None,
        module: RLModule | None = None,
        local_env_runner: bool = True,
        remote_backend: str | None = "thread",
        runner_cls: Any = None,
    ):
        self.config = config
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
        #: Metrics of runners that failed, from the partial fragments they left (get_metrics()).
        self._salvaged_metrics: list[dict[str, Any]] = []
        self._local_watchdog = _LocalSampleWatchdog(config.sample_timeout_s, config.batch_mode)
        # Asynchronous sampling (async_sample): each remote runner's queued sample() requests, the
        # time the oldest of them started, and the runner metrics that came back with results.
        self._in_flight: dict[int, deque[Future]] = {}
        self._in_flight_since: dict[int, float] = {}
        self._async_metrics: list[dict[str, Any]] = []
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
            build_errors = self._wait_for_builds() if validate else {}
            if wants_local and not local_envs:
                self._local_env_runner = self._make_local(env_info=self._built_remote().submit(_env_info).result())
            #: Sub-envs per runner, as the runners resolved config.num_envs_per_env_runner.
            self.num_envs_per_env_runner = self._resolved_num_envs()
            self._sync_new_remotes(wait=validate, skip=set(build_errors))
            #: Failures and restarts of the remote runners (rlx.env.runner_restarts).
            self._ft = RunnerSupervisor(self)
            for index, err in build_errors.items():  # restarted, or dropped with ignore_env_runner_failures
                self._ft.failed(self._remote[index - 1], err, worker_kept=False)
        except BaseException:
            self.stop()
            raise

    def _make_local(self, env_info: Any = None) -> Any:
        if env_info is None and self.config.env is None and issubclass(self._runner_cls, SingleAgentEnvRunner):
            # env=None with observation_space/action_space: a runner without sub-envs (external envs).
            env_info = EnvInfo(self.config.observation_space, self.config.action_space, 1, False)
        kwargs = {} if env_info is None else {"env_info": env_info}
        return self._runner_cls(config=self.config, worker_index=0, num_workers=int(self.config.num_env_runners),
                                module_spec=self._module_spec, module=self._local_module, **kwargs)

    def _wait_for_builds(self) -> dict[int, BaseException]:
        """Wait until every remote runner is built; {index: error} of those whose build failed.
        A failure is raised unless the fault-tolerance settings tolerate it (restart_failed_env_runners,
        ignore_env_runner_failures: the failed runners are then restarted or dropped) and some
        runner was built."""
        tolerated = self.config.restart_failed_env_runners or self.config.ignore_env_runner_failures
        errors: dict[int, BaseException] = {}
        for handle in self._remote:
            wait_ready = getattr(handle, "wait_ready", None)
            if wait_ready is None:
                continue
            try:
                wait_ready()
            except Exception as err:
                if not tolerated:
                    raise
                errors[handle.index] = err
        if errors and len(errors) == len(self._remote):
            raise next(iter(errors.values()))
        return errors

    def _built_remote(self) -> Any:
        """The first remote runner that was built (one whose build failed does not answer)."""
        return next((h for h in self._remote if not h.ready.done() or h.ready.exception() is None), self._remote[0])

    def _resolved_num_envs(self) -> int:
        runner = self._local_env_runner
        if runner is not None:
            return int(getattr(runner, "num_envs", self.config.num_envs_per_env_runner))
        if issubclass(self._runner_cls, SingleAgentEnvRunner):
            return int(self._built_remote().submit(_env_info).result().num_envs)
        return int(self.config.num_envs_per_env_runner)

    def _sync_new_remotes(self, wait: bool = True, skip: set[int] = frozenset()) -> None:
        """Give freshly built remote runners (all but those in `skip`) the local runner's weights,
        observation filter and exploration state, so their first batch comes from the policy the
        learner trains. Without `wait`, the calls queue ahead of the runners' first sample() (and a
        runner that failed to build reports it there: validate_env_runners_after_construction=False)."""
        local = self._local_env_runner
        if local is None or not self._remote:
            return
        call = _RestoreCall(local.get_weights(), local.get_state())
        futures = [handle.submit(call) for handle in self._remote if handle.index not in skip]
        for future in futures if wait else ():
            future.result()

    def _runner_factory(self, index: int) -> RunnerFactory:
        """What builds remote runner `index` (shipped to its worker for a restart in place)."""
        return RunnerFactory(self._runner_cls, self.config, index, int(self.config.num_env_runners),
                             self._module_spec)

    def _make_remote(self, index: int, build_in_background: bool = False) -> Any:
        """A handle on a new remote runner `index`. Worker processes and Ray actors are built in
        the background (`wait_ready()` waits); a threaded runner is built here unless
        `build_in_background`, then on its own thread (its `ready` Future says when)."""
        num_workers = int(self.config.num_env_runners)
        if self.backend == "thread":
            if build_in_background:
                return ThreadedEnvRunner(None, index, factory=self._runner_factory(index))
            runner = self._runner_cls(
                config=self.config, worker_index=index, num_workers=num_workers, module_spec=self._module_spec,
            )
            return ThreadedEnvRunner(runner, index)
        if self.backend == "ray":
            return RayEnvRunner(self._runner_cls, self.config, index, num_workers, self._module_spec)
        threads = max(1, int(self.config.num_cpus_per_env_runner or 1))
        return ProcessEnvRunner(self._runner_cls, self.config, index, num_workers, self._module_spec,
                                num_threads=threads)

    # ------------------------------------------------------------ runners

    @property
    def local_env_runner(self) -> SingleAgentEnvRunner | None:
        """The EnvRunner in this process (None when the group has only remote runners)."""
        return self._local_env_runner

    def local_worker(self) -> SingleAgentEnvRunner | None:
        """Old name of `local_env_runner`."""
        return self._local_env_runner

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

    def recreate_runner(self, index: int, timeout: float | None = None) -> None:
        """Replace remote runner `index` (or the local one, 0) by a freshly built one, waiting
        at most `timeout` seconds for a remote one to be built."""
        if index == 0:
            old = self._local_env_runner
            env_info = None if old is None or getattr(old, "has_envs", True) else old.env_info()
            self._local_module = None
            self._local_env_runner = self._make_local(env_info=env_info)
            if hasattr(self, "_local_handle"):
                self._local_handle.stop(close_runner=True)
                self._local_handle = ThreadedEnvRunner(self._local_env_runner, 0)
            elif old is not None:
                old.stop()
        else:
            pos = [r.index for r in self._remote].index(index)
            _retire(self._remote[pos])
            self._remote[pos] = self._make_remote(index)
            self.num_remote_worker_restarts += 1
            self._forget_requests(index)
            self._ft.replaced(index)
            wait_ready = getattr(self._remote[pos], "wait_ready", None)
            if wait_ready is not None:
                wait_ready(timeout=timeout)
            return
        self.num_remote_worker_restarts += 1

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
        out = []
        if local_env_runner and self._local_env_runner is not None:
            out.append(func(self._local_env_runner))
        handles = [
            r for r in self._remote
            if (remote_worker_ids is None or r.index in remote_worker_ids) and (self._ft.is_up(r) or not healthy_only)
        ]
        futures = [h.submit(func) for h in handles]
        out.extend(f.result(timeout=timeout_seconds) for f in futures)
        return out

    def foreach_worker(self, func: Callable[[Any], Any], local_worker: bool = True, **kwargs: Any) -> list[Any]:
        """Old name of `foreach_env_runner`."""
        return self.foreach_env_runner(func, local_env_runner=local_worker, **kwargs)

    def foreach_env_runner_with_id(self, func: Callable[[int, Any], Any], local_env_runner: bool = True) -> list[Any]:
        """Apply `func(index, runner)` to each runner."""
        out = []
        if local_env_runner and self._local_env_runner is not None:
            out.append(func(0, self._local_env_runner))
        futures = [h.submit(lambda r, i=h.index: func(i, r)) for h in self._ft.up_handles()]
        out.extend(f.result() for f in futures)
        return out

    foreach_worker_with_id = foreach_env_runner_with_id

    def foreach_worker_with_index(self, func: Callable[[int, Any], Any], local_worker: bool = True) -> list[Any]:
        """Apply `func(index, runner)` to each runner, as seed 003 shows (`lambda _id, worker: ...`).
        Older RLlib passed `(worker, index)`: a function whose parameters are named that way (the first
        one a worker, e.g. `lambda ev, i: ...`) still gets them in that order."""
        if _worker_first(func):
            return self.foreach_env_runner_with_id(lambda i, r: func(r, i), local_env_runner=local_worker)
        return self.foreach_env_runner_with_id(func, local_env_runner=local_worker)

    # ------------------------------------------------------------ data

    #: The Algorithm's offline input and output (rlx.offline.offline_io.OfflineIO), or None.
    offline_io: Any = None

    def sample(self, num_timesteps: int | None = None, explore: bool | None = None) -> dict[str, np.ndarray]:
        """Collect at least `num_timesteps` env steps (one fragment per runner when None) as one batch.

        Without remote runners the local runner samples. With them, every healthy remote
        runner samples its share in parallel; their time-major batches are joined along
        the sub-env axis, so each column stays one sub-env's trajectory. With offline settings
        (`input_`, `output`) the group's `offline_io` reads the batch from the input instead,
        and writes every batch returned to the output.
        """
        if self.offline_io is not None:
            return self.offline_io.sample(num_timesteps, explore, self._sample_envs)
        return self._sample_envs(num_timesteps, explore)

    def _sample_envs(self, num_timesteps: int | None, explore: bool | None) -> dict[str, np.ndarray]:
        """`sample()` from the envs: the local runner, or every remote runner in service.

        Each remote runner is asked for a share of what is still to collect, and a runner that
        answers (or fails, leaving a partial fragment, and is restarted) gets a share of what is
        left at once, without waiting for the others; a restarted runner joins as soon as it is
        built. Without `num_timesteps`, each runner in service samples one fragment.
        """
        if not self._remote:
            return self._sample_local(num_timesteps, explore)
        per_runner: dict[int, list[dict[str, np.ndarray]]] = {}
        requests: dict[int, _SampleRequest] = {}
        asked: set[int] = set()  # without num_timesteps: the runners asked for their fragment
        collected = 0
        while True:
            handles = self._ft.up_handles() if requests else self._ft.sampling_handles()
            idle = [h for h in handles if h.index not in requests and (num_timesteps is not None or h.index not in asked)]
            if num_timesteps is None:
                shares = {h.index: None for h in idle}
            else:
                left = num_timesteps - collected - sum(r.share for r in requests.values())
                shares = {h.index: max(1, -(-left // len(idle))) for h in idle} if left > 0 and idle else {}
            for handle in idle:
                if handle.index in shares:
                    share = shares[handle.index]
                    future = handle.submit(_SampleCall(share, explore, self._compresses_observations()))
                    requests[handle.index] = _SampleRequest(handle, future, share or 0, time.monotonic())
                    asked.add(handle.index)
            if not requests:
                if collected and (num_timesteps is None or collected >= num_timesteps):
                    break
                asked.clear()  # every runner asked failed without a step: ask the ones back again
                continue
            collected += self._collect_samples(requests, per_runner)
            self._ft.advance()
        layout = tuple(sorted(per_runner))
        if layout != self._sampling_layout:
            if self._sampling_layout:
                self.num_resets += 1
            self._sampling_layout = layout
        self._merge_filters(layout)
        return join_runner_batches([concat_batches(per_runner[i]) for i in layout])

    def _collect_samples(self, requests: dict[int, "_SampleRequest"], per_runner: dict[int, list[Any]]) -> int:
        """Wait until a sample() request finishes (or one times out, or a restarted runner is
        built), move the finished ones from `requests` to `per_runner` (with the partial
        fragments of runners whose env failed) and return the steps they brought."""
        cfg = self.config
        timeout = cfg.sample_timeout_s or None
        wake = [r.future for r in requests.values()] + self._ft.starting_futures()
        deadline = None if timeout is None else min(r.started for r in requests.values()) + timeout
        wait_futures(wake, timeout=None if deadline is None else max(0.0, deadline - time.monotonic()),
                     return_when=FIRST_COMPLETED)
        steps = 0
        now = time.monotonic()
        for index, request in list(requests.items()):
            handle = request.handle
            if request.future.done():
                del requests[index]
                try:
                    batch, resets = request.future.result()
                except Exception as err:  # a crashed env or a dead process
                    fragment = self._salvage(handle, err)
                    if fragment is not None:  # what it sampled before its env failed
                        per_runner.setdefault(index, []).append(fragment.batch)
                        steps += num_sampled_steps(fragment.batch, cfg.count_steps_by)
                    self._ft.failed(handle, err)
                    continue
                if self._compresses_observations():
                    batch = decompress_observations(batch)  # unpacked as it arrives
                per_runner.setdefault(index, []).append(batch)
                steps += num_sampled_steps(batch, cfg.count_steps_by)
                self._ft.delivered(index)
                if self._runner_resets.get(index, resets) != resets:
                    self.num_resets += 1
                self._runner_resets[index] = resets
            elif timeout is not None and now - request.started > timeout:
                del requests[index]
                kill = getattr(handle, "kill", None)
                if kill is not None:
                    kill()
                self._ft.failed(handle, EnvRunnerFailureError(
                    f"EnvRunner {index} did not answer sample() within {timeout:g} s; is an env stuck? The runner "
                    f"was stopped.{_complete_episodes_hint(cfg.batch_mode)}"), hung=True)
        return steps

    def _sample_local(self, num_timesteps: int | None, explore: bool | None) -> dict[str, np.ndarray]:
        runner = self._local_env_runner
        with self._local_watchdog:
            if num_timesteps is None:
                batch = runner.sample(explore=explore)
            else:
                batches = []
                collected = 0
                while collected < num_timesteps:
                    batches.append(runner.sample(explore=explore))
                    collected += num_sampled_steps(batches[-1], self.config.count_steps_by)
                batch = concat_batches(batches)
        self.num_resets = runner.num_resets
        return batch

    # ------------------------------------------------------------ asynchronous sampling

    def async_sample(self, *, explore: bool | None = None, weights_from: Any = None,
                     weights_seq_no: int | None = None, global_vars: dict | None = None,
                     max_new_requests: int | None = None, wait_s: float | None = None) -> list["AsyncSample"]:
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
            samples = self._sample_async(explore, weights_from, weights_seq_no, global_vars, max_new_requests, wait_s)
            for sample in samples:
                self.offline_io.write_sampled(sample.batch, runner_index=sample.runner_index)
            return samples
        return self._sample_async(explore, weights_from, weights_seq_no, global_vars, max_new_requests, wait_s)

    def _sample_async(self, explore: bool | None, weights_from: Any, weights_seq_no: int | None,
                      global_vars: dict | None, max_new_requests: int | None,
                      wait_s: float | None) -> list["AsyncSample"]:
        """`async_sample()` from the envs."""
        if not self._remote:
            local = self._local_env_runner
            if weights_from is not None and weights_seq_no is not None and local.weights_seq_no != weights_seq_no:
                self.sync_weights(from_worker_or_learner_group=weights_from, weights_seq_no=weights_seq_no)
            batch = self._sample_local(None, explore)
            steps = num_sampled_steps(batch, self.config.count_steps_by)
            return [AsyncSample(batch, 0, int(local.weights_seq_no), steps)]
        budget = [float("inf") if max_new_requests is None else int(max_new_requests)]
        sync = _RunnerSync(self, weights_from, weights_seq_no, global_vars)

        def request(handles: list[Any]) -> None:
            # One request at a time to the emptiest queue, so a small budget goes to idle runners.
            while budget[0] > 0 and handles:
                handle = min(handles, key=lambda h: len(self._in_flight.get(h.index, ())))
                if self._queue_sample_request(handle, explore, sync):
                    budget[0] -= 1
                else:
                    handles.remove(handle)  # its queue is full

        request(self._ft.sampling_handles())
        samples: list[AsyncSample] = []
        ready = self._wait_for_samples(wait_s, samples)
        with_delta = self._collects_filter_deltas()
        failed: set[int] = set()
        for handle, future in ready:
            if handle.index in failed:
                continue  # sampled after its env failed: the runner is being restarted
            try:
                batch, seq_no, resets, metrics, delta = future.result()
                if self._compresses_observations():
                    batch = decompress_observations(batch)  # unpacked as it arrives
            except Exception as err:  # a crashed env or a dead process
                failed.add(handle.index)
                self._fail_async(handle, err, samples)
                continue
            self._ft.delivered(handle.index)
            self._async_metrics.append(metrics)
            if with_delta and delta is not None:
                self._local_env_runner.filter.merge_delta(delta)
            if self._runner_resets.get(handle.index, resets) != resets:
                self.num_resets += 1
            self._runner_resets[handle.index] = resets
            steps = num_sampled_steps(batch, self.config.count_steps_by)
            samples.append(AsyncSample(batch, handle.index, int(seq_no), steps))
        # The runners that delivered sample on while the caller trains.
        request(list({h.index: h for h, _ in ready if self._ft.is_up(h)}.values()))
        return samples

    def num_sample_requests_in_flight(self) -> int:
        """Asynchronous sample() requests queued or running on the remote runners."""
        return sum(len(q) for q in self._in_flight.values())

    def _compresses_observations(self) -> bool:
        """Whether remote runners send their observations compressed (compress_observations; not
        for threads, whose batches never leave this process)."""
        return bool(self.config.compress_observations) and self.backend != "thread"

    def _collects_filter_deltas(self) -> bool:
        local = self._local_env_runner
        return local is not None and _filter_has_state(local.filter) and bool(self.config.synchronize_filters) \
            and bool(self.config.use_worker_filter_stats)

    def _queue_sample_request(self, handle: Any, explore: bool | None, sync: "_RunnerSync") -> bool:
        """Queue one sample() request on `handle` (after what `sync` has for it) unless it has
        max_requests_in_flight_per_env_runner already; whether it was queued."""
        queue = self._in_flight.setdefault(handle.index, deque())
        if len(queue) >= int(self.config.max_requests_in_flight_per_env_runner):
            return False
        sync.before_requests(handle)
        if not queue:
            self._in_flight_since[handle.index] = time.monotonic()
        queue.append(handle.submit(_AsyncSampleCall(explore, self._collects_filter_deltas(),
                                                    self._compresses_observations())))
        return True

    def _wait_for_samples(self, wait_s: float | None, samples: list["AsyncSample"]) -> list[tuple[Any, Future]]:
        """(handle, future) of every finished request, oldest first per runner, after waiting up
        to `wait_s` seconds for the first (None: until one finishes). A runner whose request has
        run longer than sample_timeout_s is killed and handled as a failed runner (what it
        sampled before goes to `samples`)."""
        handles = {h.index: h for h in self._remote}
        heads = {i: q[0] for i, q in self._in_flight.items() if q and i in handles}
        if not heads:
            return []
        timeout = self.config.sample_timeout_s or None
        now = time.monotonic()
        deadline = None if timeout is None else min(self._in_flight_since[i] for i in heads) + timeout
        limit = deadline if wait_s is None else min(now + wait_s, deadline or float("inf"))
        wait_futures(list(heads.values()), timeout=None if limit is None else max(0.0, limit - now),
                     return_when=FIRST_COMPLETED)
        ready = []
        now = time.monotonic()
        for index in list(heads):
            queue = self._in_flight[index]
            while queue and queue[0].done():
                ready.append((handles[index], queue.popleft()))
                self._in_flight_since[index] = now
            if queue and timeout is not None and now - self._in_flight_since[index] > timeout:
                kill = getattr(handles[index], "kill", None)
                if kill is not None:
                    kill()
                self._fail_async(handles[index], EnvRunnerFailureError(
                    f"EnvRunner {index} did not answer sample() within {timeout:g} s; is an env stuck? The runner "
                    f"was stopped.{_complete_episodes_hint(self.config.batch_mode)}"), samples, hung=True)
        return ready

    def _fail_async(self, handle: Any, err: BaseException, samples: list["AsyncSample"], hung: bool = False) -> None:
        """A runner failed during asynchronous sampling: keep what it sampled before (into
        `samples`), then hand the failure to the supervisor (which raises unless the
        fault-tolerance settings tolerate it)."""
        fragment = self._salvage(handle, err)
        if fragment is not None:
            steps = num_sampled_steps(fragment.batch, self.config.count_steps_by)
            samples.append(AsyncSample(fragment.batch, handle.index, fragment.weights_seq_no, steps))
        self._ft.failed(handle, err, hung=hung)

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

    def _call_all(self, handles: list[Any], fn: Callable[[Any], Any], timeout: float | None = None,
                  what: str = "call") -> dict[int, Any]:
        """Run `fn` on every handle in parallel; {index: result} of those that answered
        within `timeout` seconds (from the start of the call).

        A runner that fails or does not answer in time (one that hangs is killed, so a restart
        starts afresh) goes to the supervisor, which restarts or drops it, or raises, as the
        fault-tolerance settings say.
        """
        cfg = self.config
        futures = [(h, h.submit(fn)) for h in handles]
        deadline = None if not timeout else time.monotonic() + timeout
        out: dict[int, Any] = {}
        failures: list[tuple[Any, BaseException, bool]] = []
        for handle, future in futures:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                out[handle.index] = future.result(timeout=left)
            except FutureTimeoutError:
                kill = getattr(handle, "kill", None)
                if kill is not None:
                    kill()
                failures.append((handle, EnvRunnerFailureError(
                    f"EnvRunner {handle.index} did not answer {what} within {timeout:g} s; "
                    f"is an env stuck? The runner was stopped.{_complete_episodes_hint(cfg.batch_mode)}"), True))
            except Exception as err:  # a crashed env or a dead process
                failures.append((handle, err, False))
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
        if not _num_steps(fragment.batch):
            return None
        self._ft.delivered(handle.index)
        return fragment

    def _forget_requests(self, index: int) -> None:
        """Drop the asynchronous sample() requests queued on runner `index` (it failed)."""
        self._in_flight.pop(index, None)
        self._in_flight_since.pop(index, None)

    def _start_replacement(self, index: int, in_place: bool) -> Future:
        """Start restarting runner `index` (for the supervisor); the returned Future resolves once
        the new runner is built. `in_place`: its worker is alive, so a new runner is built in
        it; else the worker is replaced by a new one (process, actor or thread)."""
        pos = [r.index for r in self._remote].index(index)
        handle = self._remote[pos]
        if in_place and handle.healthy:
            return handle.submit(RebuildRunner(self._runner_factory(index)))
        _retire(handle)
        self._remote[pos] = self._make_remote(index, build_in_background=True)
        return self._remote[pos].ready

    def _runner_restarted(self, index: int) -> Future | None:
        """Runner `index` was rebuilt: queue the local runner's weights, observation filter and
        exploration state ahead of its first sample() (the Future of that call; None without a
        local runner), and start a new layout (its episodes are new)."""
        handle = self._remote[[r.index for r in self._remote].index(index)]
        self._runner_resets.pop(index, None)
        self._sent_weights.pop(index, None)
        self.num_resets += 1
        local = self._local_env_runner
        if local is not None:
            seq_no = getattr(local, "weights_seq_no", None)
            self._sent_weights[index] = seq_no
            return handle.submit(_RestoreCall(local.get_weights(), local.get_state(), seq_no))
        return None

    def take_restarted_indices(self) -> list[int]:
        """Indices of the runners restarted since the last call (for on_env_runners_recreated)."""
        return self._ft.take_restarted()

    # ------------------------------------------------------------ metrics, weights, filters

    def get_metrics(self) -> list[dict[str, Any]]:
        """Each runner's metrics since the last call (dicts of Stats, see EnvRunner.get_metrics)."""
        out = []
        if self._local_env_runner is not None:
            out.append(self._local_env_runner.get_metrics())
        # Runners that failed: the episodes they completed before, from their partial fragments.
        out.extend(self._salvaged_metrics)
        self._salvaged_metrics = []
        if self._in_flight or self._async_metrics:
            # Sampling asynchronously: the runners' metrics came back with their samples (asking a
            # runner now would wait for the sample it is busy with).
            out.extend(self._async_metrics)
            self._async_metrics = []
            return out
        healthy = self._ft.up_handles()
        if healthy:
            answers = self._call_all(healthy, _get_metrics, timeout=self.config.metrics_episode_collection_timeout_s,
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

        # A Learner's `module` is a view of its RLModule: compare the modules behind the views.
        source_module = unwrap_module(getattr(from_worker_or_learner_group, "module", None))
        weights = None

        def get_weights() -> Any:
            nonlocal weights
            if weights is None:
                weights = from_worker_or_learner_group.get_weights()
                if isinstance(weights, dict) and "default_policy" in weights and \
                        not getattr(from_worker_or_learner_group, "is_multi_agent", False):
                    weights = weights["default_policy"]
            return weights

        local = self._local_env_runner
        if local is not None and (to_worker_indices is None or 0 in to_worker_indices):
            if source_module is None or unwrap_module(local.module) is not source_module:
                local.set_weights(get_weights(), weights_seq_no=weights_seq_no)
            elif weights_seq_no is not None:
                local.weights_seq_no = int(weights_seq_no)
        for handle in self._remote:
            if not self._ft.is_up(handle) or (to_worker_indices is not None and handle.index not in to_worker_indices):
                continue
            if weights_seq_no is not None and self._sent_weights.get(handle.index) == weights_seq_no:
                continue
            if isinstance(handle, ThreadedEnvRunner):
                if handle.busy:
                    continue
                handle.runner.set_weights(get_weights(), global_vars=global_vars, weights_seq_no=weights_seq_no)
            else:
                # Queued behind nothing but earlier calls, so the next sample() uses these weights.
                handle.submit(_SetWeightsCall(get_weights(), global_vars, weights_seq_no))
            self._sent_weights[handle.index] = weights_seq_no

    def _merge_filters(self, indices: tuple[int, ...]) -> None:
        """Fold the observation statistics the sampling runners gathered into the local
        runner's filter (use_worker_filter_stats) and send the merged filter back to them
        (update_worker_filter_stats)."""
        local = self._local_env_runner
        if local is None or not _filter_has_state(local.filter) or not self.config.synchronize_filters:
            return
        handles = [h for h in self._remote if h.index in indices and self._ft.is_up(h)]
        if self.config.use_worker_filter_stats:
            for delta in self._call_all(handles, _pop_filter_delta).values():
                local.filter.merge_delta(delta)
        if self.config.update_worker_filter_stats:
            state = local.filter.get_state()
            for handle in handles:
                handle.submit(_SetFilterCall(state))

    def sync_filters(self, source: Any) -> None:
        """Copy the observation filter state of `source` (an EnvRunner) to every idle runner
        (remote processes and actors get it queued as a call)."""
        state = source.filter.get_state()
        for runner in self.idle_runners():
            if runner is not source:
                runner.filter.set_state(state)
        for handle in self._remote:
            if self._ft.is_up(handle) and not isinstance(handle, ThreadedEnvRunner):
                handle.submit(_SetFilterCall(state))

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
        steps: list[Callable[[], Any]] = [self._local_watchdog.close]
        steps.extend(handle.stop for handle in self._remote)
        if hasattr(self, "_local_handle"):
            # Closes the envs once a call still running on the handle's thread has returned.
            steps.append(lambda: self._local_handle.stop(close_runner=True))
        elif self._local_env_runner is not None:
            steps.append(self._local_env_runner.stop)
        run_all(steps)


def run_all(steps: list[Callable[[], Any]]) -> None:
    """Call every step, even when one raises; then raise the first error (clean-up code:
    one part that fails to stop must not leave the others running)."""
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as err:
            if first is None:
                first = err
            else:
                logger.warning("While stopping: %s: %s", type(err).__name__, err)
    if first is not None:
        raise first


def _retire(handle: Any) -> None:
    """Stop a runner handle that is being replaced and drop what ties it to this process."""
    handle.stop()
    err = getattr(handle, "last_error", None)
    if err is not None:
        # The traceback's frames (_call_all's) hold the handle itself: without clearing them the
        # handle would wait for the cycle collector. Its error was already logged or raised.
        traceback.clear_frames(err.__traceback__)


_WORKER_NAMES = frozenset({"ev", "w", "worker", "env_runner", "runner", "rollout_worker", "evaluator", "er"})
_INDEX_NAMES = frozenset({"i", "idx", "index", "id", "_id", "worker_id", "worker_index", "wid", "_i", "_idx"})


def _worker_first(func: Callable[..., Any]) -> bool:
    """Whether `func` names its two parameters in the old (worker, index) order: its first parameter
    has a worker's name or its second an index's."""
    import inspect

    try:
        names = [p.name for p in inspect.signature(func).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    if len(names) < 2:
        return False
    first, second = names[0].lower(), names[1].lower()
    return first in _WORKER_NAMES or (second in _INDEX_NAMES and first not in _INDEX_NAMES)


def _complete_episodes_hint(batch_mode: str) -> str:
    if batch_mode != "complete_episodes":
        return ""
    return (" With batch_mode='complete_episodes' a runner samples until every episode has ended: an env "
            "whose episodes never end (no terminated/truncated, no time limit) keeps it sampling forever. "
            "Wrap the env in gymnasium.wrappers.TimeLimit or use batch_mode='truncate_episodes'.")


class _LocalSampleWatchdog:
    """Warns once per sample() call of the local EnvRunner that has not returned after `timeout_s`.

    A remote runner that hangs is killed after sample_timeout_s; the runner in the driver's
    own process cannot be, so at least the user learns why training does not move on. One
    thread (started on first use, ended by `close()`) watches every call; entering and
    leaving a call costs two attribute writes.
    """

    def __init__(self, timeout_s: float | None, batch_mode: str):
        self._timeout_s = float(timeout_s or 0.0)
        self._batch_mode = batch_mode
        self._calls = 0
        #: (number of the running call, when it started), or None between calls.
        self._running: tuple[int, float] | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_LocalSampleWatchdog":
        if self._timeout_s > 0 and not self._closed.is_set():
            self._calls += 1
            self._running = (self._calls, time.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="rlx-local-sample-watchdog", daemon=True)
                self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._running = None

    def _watch(self) -> None:
        warned = 0
        delay = self._timeout_s
        while not self._closed.wait(delay):
            running, delay = self._running, self._timeout_s
            if running is None or running[0] == warned:
                continue
            elapsed = time.monotonic() - running[1]
            if elapsed < self._timeout_s:
                delay = self._timeout_s - elapsed
                continue
            warned = running[0]
            logger.warning(
                "The local EnvRunner's sample() has not returned after sample_timeout_s=%g s. rlx cannot stop a "
                "runner in the driver's own process and keeps waiting; is an env's step() or reset() stuck?%s",
                self._timeout_s, _complete_episodes_hint(self._batch_mode))

    def close(self) -> None:
        """End the watching thread."""
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def _num_steps(batch: Any) -> int:
    if isinstance(batch, MultiAgentBatch):
        return batch.env_steps()
    return int(batch["valid"].sum()) if "valid" in batch else int(batch["rewards"].size)


def num_sampled_steps(batch: Any, count_steps_by: str = "env_steps") -> int:
    """Env steps in a sampled batch (agent steps of a MultiAgentBatch with count_steps_by='agent_steps')."""
    if isinstance(batch, MultiAgentBatch) and count_steps_by == "agent_steps":
        return batch.agent_steps()
    return _num_steps(batch)


def join_runner_batches(batches: list[Any]) -> Any:
    """Join time-major batches of different runners side by side (along the sub-env axis).

    Batches of different lengths are padded at the end with rows marked invalid, so every
    column keeps its own sub-env's trajectory.
    """
    if isinstance(batches[0], MultiAgentBatch):
        return MultiAgentBatch.join_side_by_side(batches)
    return join_time_major(batches, axis=1)


# Calls shipped to remote runners: module-level classes, so they pickle by reference.


@dataclass
class AsyncSample:
    """One fragment that a runner sampled asynchronously (EnvRunnerGroup.async_sample).

    `weights_seq_no` is the version of the weights it was sampled with (the Algorithm's
    `weights_version` when they were sent), so `weights_version - weights_seq_no` is the
    policy lag in learner updates; `env_steps` counts its steps as count_steps_by says.
    """

    batch: Any
    runner_index: int
    weights_seq_no: int
    env_steps: int


class _RunnerSync:
    """What a runner gets ahead of its next asynchronous sample() requests, once per
    `async_sample` call: the source's weights when the runner's are older than `weights_seq_no`
    (fetched from the source once for all runners) and the merged observation filter."""

    def __init__(self, group: EnvRunnerGroup, weights_from: Any, weights_seq_no: int | None,
                 global_vars: dict | None):
        self.group, self.weights_from, self.weights_seq_no, self.global_vars = \
            group, weights_from, weights_seq_no, global_vars
        self._weights: Any = None
        self._synced: set[int] = set()
        local, config = group.local_env_runner, group.config
        self._filter_state = local.filter.get_state() if local is not None and _filter_has_state(local.filter) \
            and config.synchronize_filters and config.update_worker_filter_stats else None

    def before_requests(self, handle: Any) -> None:
        """Queue the weights and filter `handle` needs (once per call)."""
        if handle.index in self._synced:
            return
        self._synced.add(handle.index)
        sent = self.group._sent_weights
        if self.weights_from is not None and self.weights_seq_no is not None \
                and sent.get(handle.index) != self.weights_seq_no:
            handle.submit(_SetWeightsCall(self._source_weights(), self.global_vars, self.weights_seq_no))
            sent[handle.index] = self.weights_seq_no
        if self._filter_state is not None:
            handle.submit(_SetFilterCall(self._filter_state))

    def _source_weights(self) -> Any:
        if self._weights is None:
            weights = self.weights_from.get_weights()
            if isinstance(weights, dict) and "default_policy" in weights \
                    and not getattr(self.weights_from, "is_multi_agent", False):
                weights = weights["default_policy"]
            self._weights = weights
        return self._weights


class _AsyncSampleCall:
    """One asynchronous sample(): the fragment with the weight version that produced it, the
    runner's reset count and metrics, and (when asked) its observation filter's new statistics."""

    def __init__(self, explore: bool | None, with_filter_delta: bool, compress: bool = False):
        self.explore = explore
        self.with_filter_delta = with_filter_delta
        self.compress = compress

    def __call__(self, runner: Any) -> tuple[Any, int, int, dict[str, Any], Any]:
        batch = runner.sample(explore=self.explore)
        if self.compress:
            batch = compress_observations(batch)
        delta = runner.filter.pop_delta() if self.with_filter_delta else None
        return batch, getattr(runner, "weights_seq_no", 0), runner.num_resets, runner.get_metrics(), delta


@dataclass
class _SampleRequest:
    """A sample() call in flight on a remote runner (EnvRunnerGroup._sample_envs)."""

    handle: Any
    future: Future
    share: int
    started: float


class _SampleCall:
    def __init__(self, num_timesteps: int | None, explore: bool | None, compress: bool = False):
        self.num_timesteps = num_timesteps
        self.explore = explore
        self.compress = compress

    def __call__(self, runner: Any) -> tuple[dict[str, np.ndarray], int]:
        batch = runner.sample(num_timesteps=self.num_timesteps, explore=self.explore)
        return (compress_observations(batch) if self.compress else batch), runner.num_resets


class _SetWeightsCall:
    def __init__(self, weights: Any, global_vars: dict | None, seq_no: int | None):
        self.weights, self.global_vars, self.seq_no = weights, global_vars, seq_no

    def __call__(self, runner: Any) -> None:
        runner.set_weights(self.weights, global_vars=self.global_vars, weights_seq_no=self.seq_no)


class _RestoreCall:
    def __init__(self, weights: Any, state: dict[str, Any], seq_no: int | None = None):
        self.weights, self.state, self.seq_no = weights, state, seq_no

    def __call__(self, runner: Any) -> None:
        runner.set_weights(self.weights, weights_seq_no=self.seq_no)
        runner.set_state(self.state)


class _SetFilterCall:
    def __init__(self, state: dict[str, Any]):
        self.state = state

    def __call__(self, runner: Any) -> None:
        runner.filter.set_state(self.state)


def _env_info(runner: Any) -> Any:
    return runner.env_info()


def _get_metrics(runner: Any) -> dict[str, Any]:
    return runner.get_metrics()


def _filter_has_state(runner_filter: Any) -> bool:
    """Whether a runner's filter (observation filter, plus connector state) has anything to sync."""
    return bool(getattr(runner_filter, "has_state", not runner_filter.is_identity))


def _pop_filter_delta(runner: Any) -> dict[str, Any]:
    return runner.filter.pop_delta()
