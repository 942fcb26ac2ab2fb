"""Where an EnvRunnerGroup's remote runners live, and the plumbing to reach them.

The backends are worker processes ("process"), Ray actors ("ray") and threads of this process
("thread"); each gives a handle with the same `submit(call) -> Future` interface. This module
builds and retires those handles, waits for their builds, and calls every handle at once.
"""
from __future__ import annotations

import logging
import sys
import time
import traceback
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Callable

from rlx.env.config_view import EnvConfig
from rlx.env.process_env_runner import ProcessEnvRunner
from rlx.env.ray_env_runner import RayEnvRunner
from rlx.env.runner_group.stuck_runners import stop_stuck
from rlx.env.runner_host import RunnerFactory
from rlx.env.threaded_env_runner import ThreadedEnvRunner
from rlx.utils.errors import ConfigError

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


def runner_factory(runner_cls: Any, config: EnvConfig, index: int, module_spec: Any) -> RunnerFactory:
    """What builds remote runner `index` (shipped to its worker for a restart in place)."""
    return RunnerFactory(runner_cls, config, index, int(config.num_env_runners), module_spec)


def make_remote_runner(backend: str, runner_cls: Any, config: EnvConfig, index: int, module_spec: Any,
                       build_in_background: bool = False, bundle_offset: int = 0) -> Any:
    """A handle on a new remote runner `index` on `backend`. Worker processes and Ray actors are
    built in the background (`wait_ready()` waits); a threaded runner is built here unless
    `build_in_background`, then on its own thread (its `ready` Future says when). A Ray actor
    inside a Tune trial takes bundle `bundle_offset + index` of the trial's placement group."""
    num_workers = int(config.num_env_runners)
    if backend == "thread":
        if build_in_background:
            return ThreadedEnvRunner(None, index, factory=runner_factory(runner_cls, config, index, module_spec))
        runner = runner_cls(config=config, worker_index=index, num_workers=num_workers, module_spec=module_spec)
        return ThreadedEnvRunner(runner, index)
    if backend == "ray":
        return RayEnvRunner(runner_cls, config, index, num_workers, module_spec, bundle_offset=bundle_offset)
    threads = max(1, int(config.num_cpus_per_env_runner or 1))
    return ProcessEnvRunner(runner_cls, config, index, num_workers, module_spec, num_threads=threads)


def wait_for_builds(handles: list[Any], tolerated: bool) -> dict[int, BaseException]:
    """Wait until every remote runner is built; {index: error} of those whose build failed.
    A failure is raised unless `tolerated` (the fault-tolerance settings restart or drop
    failed runners) and some runner was built."""
    errors: dict[int, BaseException] = {}
    for handle in handles:
        wait_ready = getattr(handle, "wait_ready", None)
        if wait_ready is None:
            continue
        try:
            wait_ready()
        except Exception as err:
            if not tolerated:
                raise
            errors[handle.index] = err
    if errors and len(errors) == len(handles):
        raise next(iter(errors.values()))
    return errors


def call_all(handles: list[Any], fn: Callable[[Any], Any], timeout: float | None, what: str,
             batch_mode: str) -> tuple[dict[int, Any], list[tuple[Any, BaseException, bool]]]:
    """Run `fn` on every handle in parallel: ({index: result} of those that answered within
    `timeout` seconds from the start of the call, [(handle, error, hung)] of those that failed).
    A runner that does not answer in time is killed (hung=True), so a restart starts afresh."""
    futures = [(h, h.submit(fn)) for h in handles]
    deadline = None if not timeout else time.monotonic() + timeout
    out: dict[int, Any] = {}
    failures: list[tuple[Any, BaseException, bool]] = []
    for handle, future in futures:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            out[handle.index] = future.result(timeout=left)
        except FutureTimeoutError:
            failures.append((handle, stop_stuck(handle, what, timeout or 0.0, batch_mode), True))
        except Exception as err:  # a crashed env or a dead process
            failures.append((handle, err, False))
    return out, failures


def retire(handle: Any) -> None:
    """Stop a runner handle that is being replaced and drop what ties it to this process."""
    handle.stop()
    err = getattr(handle, "last_error", None)
    if err is not None:
        # The traceback's frames (call_all's) hold the handle itself: without clearing them the
        # handle would wait for the cycle collector. Its error was already logged or raised.
        traceback.clear_frames(err.__traceback__)


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
