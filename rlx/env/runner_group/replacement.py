"""Replacing an EnvRunnerGroup's runners: a new runner for a failed or retired one.

The restart supervisor (rlx.env.runner_restarts) decides when; this module does it: builds the
new runner in the old worker or in a new one (process, actor or thread; a dead runner's process
is replaced by the group's spare worker when it has one, see rlx.env.runner_group.spares), and
brings a restarted runner up to date before its first sample(). `recreate_runner` replaces a runner on request.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from rlx.env.runner_group.backends import retire
from rlx.env.runner_group.weight_sync import restore_restarted
from rlx.env.runner_host import RebuildRunner
from rlx.env.threaded_env_runner import ThreadedEnvRunner


def _position(group: Any, index: int) -> int:
    return [r.index for r in group._remote].index(index)


def start_replacement(group: Any, index: int, in_place: bool) -> Future:
    """Start restarting runner `index`; the returned Future resolves once the new runner is
    built. `in_place`: its worker is alive, so a new runner is built in it; else the worker is
    replaced by a new one (process, actor or thread)."""
    pos = _position(group, index)
    handle = group._remote[pos]
    if in_place and handle.healthy:
        return handle.submit(RebuildRunner(group._runner_factory(index)))
    release = getattr(handle, "release_placement", None)
    if release is not None:  # a Ray actor's bundle goes to its replacement (stopping it comes later)
        release()
    # Off the driver's path: stopping a worker that is still alive may take seconds.
    retiring = threading.Thread(target=retire, args=(handle,), name=f"rlx-retire-env-runner-{index}", daemon=True)
    retiring.start()
    group._retiring = [t for t in group._retiring if t.is_alive()] + [retiring]
    adopted = group._spare.take(index, group._runner_factory(index))
    if adopted is not None:  # a started worker process: only the runner is built
        group._remote[pos], started = adopted
        return started
    group._remote[pos] = group._make_remote(index, build_in_background=True)
    return group._remote[pos].ready


def runner_restarted(group: Any, index: int) -> Future | None:
    """Runner `index` was rebuilt: queue the local runner's weights, observation filter and
    exploration state ahead of its first sample() (the Future of that call; None without a
    local runner), and start a new layout (its episodes are new)."""
    handle = group._remote[_position(group, index)]
    group._runner_resets.pop(index, None)
    group.num_resets += 1
    group._spare.replenish()  # for the next restart, now that this one no longer needs the CPUs
    return restore_restarted(group, handle)


def recreate_runner(group: Any, index: int, timeout: float | None = None) -> None:
    """Replace remote runner `index` (or the local one, 0) by a freshly built one, waiting at
    most `timeout` seconds for a remote one to be built."""
    if index == 0:
        old = group._local_env_runner
        env_info = None if old is None or getattr(old, "has_envs", True) else old.env_info()
        group._local_module = None
        group._local_env_runner = group._make_local(env_info=env_info)
        if hasattr(group, "_local_handle"):
            group._local_handle.stop(close_runner=True)
            group._local_handle = ThreadedEnvRunner(group._local_env_runner, 0)
        elif old is not None:
            old.stop()
        group.num_remote_worker_restarts += 1
        return
    pos = _position(group, index)
    retire(group._remote[pos])
    group._remote[pos] = group._make_remote(index)
    group.num_remote_worker_restarts += 1
    group._forget_requests(index)
    group._ft.replaced(index)
    wait_ready = getattr(group._remote[pos], "wait_ready", None)
    if wait_ready is not None:
        wait_ready(timeout=timeout)
