"""Asynchronous sampling (IMPALA, APPO) across an EnvRunnerGroup's remote runners.

Every runner in service keeps up to max_requests_in_flight_per_env_runner sample() requests
queued; finished ones come back as AsyncSample (the fragment and the weight version it was
sampled with), and a runner that delivered gets its next request at once, so it samples on
while the learner trains.
"""
from __future__ import annotations

import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait as wait_futures
from dataclasses import dataclass
from typing import Any

from rlx.core.remote_fragment import RemoteFragment
from rlx.env.batch_compression import decompress_observations
from rlx.env.runner_group.calls import AsyncSampleCall
from rlx.env.runner_group.stuck_runners import stop_stuck
from rlx.env.runner_group.weight_sync import RunnerSync, collects_filter_deltas
from rlx.utils.progress_events import report_env_steps


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


class AsyncSampler:
    """The asynchronous sample() requests of one group's remote runners: each runner's queue of
    requests, the time the oldest of them started, and the runner metrics that came back."""

    def __init__(self, group: Any):
        self.group = group
        self.in_flight: dict[int, deque[Future]] = {}
        self.in_flight_since: dict[int, float] = {}
        self.metrics: list[dict[str, Any]] = []

    def sample(self, explore: bool | None, weights_from: Any, weights_seq_no: int | None,
               global_vars: dict | None, max_new_requests: int | None, wait_s: float | None) -> list[AsyncSample]:
        """The finished requests' samples (see EnvRunnerGroup.async_sample), after queueing up
        to `max_new_requests` new ones (None: fill every queue) and waiting up to `wait_s`."""
        group = self.group
        budget = [float("inf") if max_new_requests is None else int(max_new_requests)]
        sync = RunnerSync(group, weights_from, weights_seq_no, global_vars)

        def request(handles: list[Any]) -> None:
            # One request at a time to the emptiest queue, so a small budget goes to idle runners.
            while budget[0] > 0 and handles:
                handle = min(handles, key=lambda h: len(self.in_flight.get(h.index, ())))
                if self._queue_request(handle, explore, sync):
                    budget[0] -= 1
                else:
                    handles.remove(handle)  # its queue is full

        request(group._ft.sampling_handles())
        samples: list[AsyncSample] = []
        ready = self._wait(wait_s, samples)
        with_delta = collects_filter_deltas(group)
        failed: set[int] = set()
        for handle, future in ready:
            if handle.index in failed:
                continue  # sampled after its env failed: the runner is being restarted
            try:
                batch, seq_no, resets, metrics, delta = future.result()
                if group._compresses_observations() and not isinstance(batch, RemoteFragment):
                    batch = decompress_observations(batch)  # unpacked as it arrives
            except Exception as err:  # a crashed env or a dead process
                failed.add(handle.index)
                self._fail(handle, err, samples)
                continue
            group._ft.delivered(handle.index)
            self.metrics.append(metrics)
            if with_delta and delta is not None:
                group.local_env_runner.filter.merge_delta(delta)
            group._note_resets(handle.index, resets)
            samples.append(AsyncSample(batch, handle.index, int(seq_no), group._count_steps(batch)))
            report_env_steps(samples[-1].env_steps, self.group.config)
        # The runners that delivered sample on while the caller trains.
        request(list({h.index: h for h, _ in ready if group._ft.is_up(h)}.values()))
        return samples

    def num_in_flight(self) -> int:
        """Requests queued or running on the remote runners."""
        return sum(len(q) for q in self.in_flight.values())

    def active(self) -> bool:
        """Whether the group samples asynchronously (requests in flight or metrics not yet taken)."""
        return bool(self.in_flight or self.metrics)

    def take_metrics(self) -> list[dict[str, Any]]:
        """The runner metrics that came back with samples since the last call."""
        out, self.metrics = self.metrics, []
        return out

    def forget(self, index: int) -> None:
        """Drop the requests queued on runner `index` (it failed)."""
        self.in_flight.pop(index, None)
        self.in_flight_since.pop(index, None)

    def _queue_request(self, handle: Any, explore: bool | None, sync: RunnerSync) -> bool:
        """Queue one sample() request on `handle` (after what `sync` has for it) unless it has
        max_requests_in_flight_per_env_runner already; whether it was queued."""
        group = self.group
        queue = self.in_flight.setdefault(handle.index, deque())
        if len(queue) >= int(group.config.max_requests_in_flight_per_env_runner):
            return False
        sync.before_requests(handle)
        if not queue:
            self.in_flight_since[handle.index] = time.monotonic()
        queue.append(handle.submit(AsyncSampleCall(explore, collects_filter_deltas(group),
                                                   group._compresses_observations())))
        return True

    def _wait(self, wait_s: float | None, samples: list[AsyncSample]) -> list[tuple[Any, Future]]:
        """(handle, future) of every finished request, oldest first per runner, after waiting up
        to `wait_s` seconds for the first (None: until one finishes). A runner whose request has
        run longer than sample_timeout_s is killed and handled as a failed runner (what it
        sampled before goes to `samples`)."""
        handles = {h.index: h for h in self.group._remote}
        heads = {i: q[0] for i, q in self.in_flight.items() if q and i in handles}
        if not heads:
            return []
        timeout = self.group.config.sample_timeout_s or None
        now = time.monotonic()
        deadline = None if timeout is None else min(self.in_flight_since[i] for i in heads) + timeout
        limit = deadline if wait_s is None else min(now + wait_s, deadline or float("inf"))
        wait_futures(list(heads.values()), timeout=None if limit is None else max(0.0, limit - now),
                     return_when=FIRST_COMPLETED)
        ready = []
        now = time.monotonic()
        for index in list(heads):
            queue = self.in_flight[index]
            while queue and queue[0].done():
                ready.append((handles[index], queue.popleft()))
                self.in_flight_since[index] = now
            if queue and timeout is not None and now - self.in_flight_since[index] > timeout:
                err = stop_stuck(handles[index], "sample()", timeout, self.group.config.batch_mode)
                self._fail(handles[index], err, samples, hung=True)
        return ready

    def _fail(self, handle: Any, err: BaseException, samples: list[AsyncSample], hung: bool = False) -> None:
        """A runner failed: keep what it sampled before (into `samples`), then hand the failure
        to the supervisor (which raises unless the fault-tolerance settings tolerate it)."""
        fragment = self.group._salvage(handle, err)
        if fragment is not None:
            steps = self.group._count_steps(fragment.batch)
            samples.append(AsyncSample(fragment.batch, handle.index, fragment.weights_seq_no, steps))
        self.group._ft.failed(handle, err, hung=hung)
