"""Synchronous sampling across an EnvRunnerGroup's remote runners (EnvRunnerGroup.sample).

Each runner in service is asked for a share of what is still to collect; a runner that answers
(or fails, leaving a partial fragment, and is restarted) gets a share of what is left at once,
without waiting for the others, and a restarted runner joins as soon as it is built. A request
that runs past sample_timeout_s kills its runner, which then fails like any other.
"""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, wait as wait_futures
from dataclasses import dataclass
from typing import Any

from rlx.env.batch_compression import decompress_observations
from rlx.env.runner_group.calls import SampleCall
from rlx.env.runner_group.stuck_runners import stop_stuck
from rlx.utils.progress_events import report_env_steps


@dataclass
class SampleRequest:
    """A sample() call in flight on a remote runner."""

    handle: Any
    future: Future
    share: int
    started: float


def sample_remote(group: Any, num_timesteps: int | None, explore: bool | None) -> dict[int, list[Any]]:
    """Collect at least `num_timesteps` steps from the remote runners of `group` (without
    `num_timesteps`, one fragment from each runner in service): {runner index: its batches}."""
    ft = group._ft
    per_runner: dict[int, list[Any]] = {}
    requests: dict[int, SampleRequest] = {}
    asked: set[int] = set()  # without num_timesteps: the runners asked for their fragment
    collected = 0
    while True:
        handles = ft.up_handles() if requests else ft.sampling_handles()
        idle = [h for h in handles if h.index not in requests and (num_timesteps is not None or h.index not in asked)]
        shares: dict[int, int | None]
        if num_timesteps is None:
            shares = {h.index: None for h in idle}
        else:
            left = num_timesteps - collected - sum(r.share for r in requests.values())
            shares = {h.index: max(1, -(-left // len(idle))) for h in idle} if left > 0 and idle else {}
        for handle in idle:
            if handle.index in shares:
                share = shares[handle.index]
                future = handle.submit(SampleCall(share, explore, group._compresses_observations()))
                requests[handle.index] = SampleRequest(handle, future, share or 0, time.monotonic())
                asked.add(handle.index)
        if not requests:
            if collected and (num_timesteps is None or collected >= num_timesteps):
                return per_runner
            asked.clear()  # every runner asked failed without a step: ask the ones back again
            continue
        arrived = _collect(group, requests, per_runner)
        collected += arrived
        report_env_steps(arrived, group.config)
        ft.advance()


def _collect(group: Any, requests: dict[int, SampleRequest], per_runner: dict[int, list[Any]]) -> int:
    """Wait until a sample() request finishes (or one times out, or a restarted runner is
    built), move the finished ones from `requests` to `per_runner` (with the partial
    fragments of runners whose env failed) and return the steps they brought."""
    cfg, ft = group.config, group._ft
    timeout = cfg.sample_timeout_s or None
    wake = [r.future for r in requests.values()] + ft.starting_futures()
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
                fragment = group._salvage(handle, err)
                if fragment is not None:  # what it sampled before its env failed
                    per_runner.setdefault(index, []).append(fragment.batch)
                    steps += group._count_steps(fragment.batch)
                ft.failed(handle, err)
                continue
            if group._compresses_observations():
                batch = decompress_observations(batch)  # unpacked as it arrives
            per_runner.setdefault(index, []).append(batch)
            steps += group._count_steps(batch)
            ft.delivered(index)
            group._note_resets(index, resets)
        elif timeout is not None and now - request.started > timeout:
            del requests[index]
            ft.failed(handle, stop_stuck(handle, "sample()", timeout, cfg.batch_mode), hung=True)
    return steps
