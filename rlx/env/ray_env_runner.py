"""RayEnvRunner: an EnvRunner inside a Ray actor, on this machine or anywhere in a Ray cluster.

Select it with `config.env_runners(env_runner_backend="ray")` (or leave the backend at
"auto" and call `ray.init()` before building the algorithm). The handle offers the surface
of the other backends (ProcessEnvRunner, ThreadedEnvRunner): `index`, `healthy`,
`last_error`, `busy`, `submit(fn) -> concurrent.futures.Future`, `ready`, `wait_ready()`,
`stop()`, `kill()` and `pid`, so EnvRunnerGroup drives Ray actors exactly like worker
processes (a RebuildRunner call replaces the runner inside the actor: rlx.env.runner_host).

Only Ray's public API is used (actors, `ObjectRef.future()`, `ray.kill`, placement
groups), so the runners can live on other nodes of a cluster. Every node must be able to
import `rlx` and whatever the config names (env classes, callbacks): install them there,
or ship them with `ray.init(runtime_env={...})`. Calls, results and the config travel with
Ray's serializer (cloudpickle, NumPy arrays out of band), so lambdas and closures work.

Ray is imported only when a RayEnvRunner is created: importing rlx never imports Ray.
"""
from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Callable

from rlx.env.config_view import EnvConfig
from rlx.env.process_env_runner import EnvRunnerDiedError
from rlx.env.ray_placement import (SharedPlacementGroup, acquire_placement_group, enclosing_placement_group,
                                   release_placement_group)
from rlx.env.runner_host import RunnerFactory, RunnerHost
from rlx.utils.ray_actors import remote_class
from rlx.utils.registry import registry_snapshot, restore_registry
from rlx.utils.stack_dump import install as install_stack_dumps

logger = logging.getLogger("rlx")

#: Seconds `stop()` gives the actor to close its envs before it is killed.
STOP_TIMEOUT_S = 5.0
#: `wait_ready()` warns after this many seconds that the actor is still not running (e.g.
#: the cluster lacks the resources it asked for) and then keeps waiting.
SCHEDULING_WARNING_S = 30.0


class _EnvRunnerActor:
    """Body of the Ray actor: holds one EnvRunner and applies functions to it, one at a time.

    `env_registry` is the driver's `registry_snapshot()`: names registered there (with
    rlx.register_env or Ray Tune's register_env) resolve in the actor as in the driver.
    """

    def __init__(self, num_threads: int, env_registry: dict[str, Any] | None = None, index: int | None = None):
        restore_registry(env_registry, where=f"the Ray actor of EnvRunner {index} (pid {os.getpid()})")

        install_stack_dumps("ray-env-runner", f"ray-env-runner-{index}")  # found by `rlx stack` on this node
        import torch

        torch.set_num_threads(max(1, int(num_threads)))
        # A RebuildRunner call replaces the runner in this actor (a restart in place).
        self.host = RunnerHost(missing="it was not built yet")

    @property
    def runner(self) -> Any:
        """The EnvRunner this actor holds (None before it is built, after a failed build or a stop)."""
        return self.host.runner

    def build(self, runner_cls: type, config: EnvConfig, index: int, num_workers: int, module_spec: Any) -> dict:
        """Build the runner; answer where it lives. A failure reaches the driver with its own
        type (e.g. rlx's EnvError for an env that cannot be created)."""
        self.host.rebuild(RunnerFactory(runner_cls, config, index, num_workers, module_spec))
        import ray

        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def apply(self, fn: Callable[[Any], Any]) -> Any:
        """`fn(runner)`: every call the driver makes goes through here."""
        return self.host.apply(fn)

    def stop_runner(self) -> None:
        """Close the runner's envs."""
        self.host.close()


def _remote_actor_class() -> Any:
    """`ray.remote(_EnvRunnerActor)`, made once per process (Ray is imported then)."""
    return remote_class(_EnvRunnerActor)


def _ensure_ray() -> Any:
    import ray

    if not ray.is_initialized():
        logger.info("env_runner_backend='ray' but Ray is not initialised: calling ray.init() "
                    "(call ray.init(...) yourself first to join a cluster or set its options).")
        ray.init()
    return ray


# ---------------------------------------------------------------- results


def _writable(value: Any) -> Any:
    """`value` with its read-only NumPy arrays replaced by copies (walking dicts, lists and tuples).

    Ray hands out large arrays zero-copy, as read-only views into its object store that pin
    the object there while they live. Callers of the other backends get arrays of their own,
    which they may modify in place (advantage normalisation, replay buffers) and keep as long
    as they like; the copy gives them the same here.
    """
    import numpy as np

    if isinstance(value, np.ndarray):
        return value if value.flags.writeable or value.dtype == object else value.copy()
    if isinstance(value, dict):  # deserialized for us alone: safe to update in place
        for k, v in value.items():
            value[k] = _writable(v)
    elif isinstance(value, list):
        value[:] = [_writable(v) for v in value]
    elif type(value) is tuple:
        return tuple(_writable(v) for v in value)
    return value


class _CallFuture(Future):
    """The Future `submit()` returns: its result is made writable (see `_writable`) in the
    thread that asks for it, once, rather than on Ray's callback thread."""

    def __init__(self) -> None:
        super().__init__()
        self._converted = False
        self._convert_lock = threading.Lock()
        self._value: Any = None

    def result(self, timeout: float | None = None) -> Any:
        value = super().result(timeout)
        with self._convert_lock:
            if not self._converted:
                self._value = _writable(value)
                self._converted = True
            return self._value


# ---------------------------------------------------------------- the handle


class RayEnvRunner:
    """A handle on one EnvRunner living in a Ray actor.

    Args:
        runner_cls: the EnvRunner class; built in the actor as
            `runner_cls(config=config, worker_index=index, num_workers=num_workers, module_spec=module_spec)`.
        config: the frozen AlgorithmConfig.
        index: the runner's index (1..num_workers).
        num_workers: number of remote runners in the group.
        module_spec: spec of the runner's RLModule.
        bundle_offset: inside a Ray Tune trial, where this group's bundles start in the trial's
            placement group after the training runners' (evaluation runners: num_env_runners);
            runner `index` takes bundle `bundle_offset + index`.

    The actor asks Ray for `num_cpus_per_env_runner` CPUs, `num_gpus_per_env_runner` GPUs and
    `custom_resources_per_env_runner`, runs torch with `max(1, int(num_cpus_per_env_runner))`
    threads, and handles one call at a time (`max_concurrency=1`); Ray answers the calls of one
    caller in the order they were made, so `submit()`s are answered in FIFO order.

    Placement (`config.placement_strategy`): the remote runners of one group share one
    placement group with a bundle per runner and that strategy ("PACK": as few nodes as
    possible, "SPREAD": across nodes, "STRICT_PACK": one node, "STRICT_SPREAD": one runner per
    node), so the resources of all runners are reserved together and a restarted runner gets
    its predecessor's bundle (bundle index-1) back. Handles find their group's placement group
    by the config object they were built from; a second group built from the same config
    object gets a placement group of its own. It is removed when the last of its runners
    stops. Runners that ask for no resources at all
    (num_cpus_per_env_runner=0 and no GPUs or custom resources) cannot use a placement group;
    they are scheduled with Ray's "SPREAD" strategy when a SPREAD strategy is asked for, else
    with "DEFAULT". Either way the actors are scheduled explicitly, never inside a placement
    group the calling task happens to run in (e.g. a Tune trial's), which has no bundles for
    them. A strategy the cluster cannot satisfy (STRICT_SPREAD with more runners than nodes)
    leaves the runners waiting; `wait_ready()` logs a warning every 30 s while it waits.

    Construction returns at once; `wait_ready()` waits until the runner is built and raises
    what building it raised. Errors of calls reach the caller with their own type (a
    RayTaskError subclass that is also, e.g., rlx's EnvError, with the remote traceback in
    its message); a dead actor (killed, crashed, its node lost) raises EnvRunnerDiedError and
    marks the handle unhealthy. NumPy arrays in results are the caller's own, writable copies
    where Ray handed out read-only zero-copy views, as with the other backends.
    """

    def __init__(self, runner_cls: type, config: EnvConfig, index: int, num_workers: int, module_spec: Any = None,
                 bundle_offset: int = 0):
        ray = _ensure_ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._ray = ray
        self.index = index
        self.healthy = True
        self.last_error: BaseException | None = None
        self.pid: int | None = None
        self.node_id: str | None = None
        self._config = config
        self._lock = threading.Lock()
        self._pending = 0
        self._dead = False
        self._stopped = False
        self._stop_request: Any = None  # the stop_runner call request_stop() sent
        self._placement: SharedPlacementGroup | None = None

        num_cpus = float(config.num_cpus_per_env_runner or 0)
        options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "num_gpus": float(config.num_gpus_per_env_runner or 0),
            "resources": dict(config.custom_resources_per_env_runner or {}) or None,
            "max_concurrency": 1,
            "max_restarts": 0,  # EnvRunnerGroup decides about restarts (restart_failed_env_runners)
        }
        bundle = bundle_offset + index
        enclosing = enclosing_placement_group(bundle)
        if enclosing is not None:
            # Inside a Ray Tune trial, whose placement group already holds a bundle per runner
            # (rlx.tune asks for them after the trial's own bundle 0, training runners first):
            # use it, reserving nothing more, or a small cluster would wait forever for a second
            # reservation.
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                enclosing, placement_group_bundle_index=bundle, placement_group_capture_child_tasks=False,
            )
        else:
            self._placement = acquire_placement_group(config, index, num_workers)
        if enclosing is None and self._placement is not None:
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self._placement.pg, placement_group_bundle_index=index - 1, placement_group_capture_child_tasks=False,
            )
        elif enclosing is None:
            spread = str(config.placement_strategy or "").upper() in ("SPREAD", "STRICT_SPREAD")
            options["scheduling_strategy"] = "SPREAD" if spread else "DEFAULT"
        try:
            self.actor = _remote_actor_class().options(**options).remote(max(1, int(num_cpus)), registry_snapshot(),
                                                                         index)
            self._ready = self._track(self.actor.build.remote(runner_cls, config, index, num_workers, module_spec))
        except BaseException:
            self.release_placement()
            raise
        self._ready.add_done_callback(self._on_ready)

    # ------------------------------------------------------------ calls

    def submit(self, fn: Callable[[Any], Any]) -> Future:
        """Queue `fn(runner)` in the actor; the Future holds its result or exception."""
        if not self._dead and not self._stopped:
            try:
                return self._track(self.actor.apply.remote(fn))
            except Exception as err:  # fn does not serialize, or Ray was shut down
                future: Future = Future()
                future.set_running_or_notify_cancel()
                future.set_exception(err)
                return future
        future = Future()
        future.set_running_or_notify_cancel()
        future.set_exception(self._died_error())
        return future

    def call(self, fn: Callable[[Any], Any], timeout: float | None = None) -> Any:
        """Run `fn(runner)` in the actor and return its result."""
        return self.submit(fn).result(timeout=timeout)

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running."""
        return self._pending > 0

    def _track(self, ref: Any) -> Future:
        """A Future for the ObjectRef `ref`, resolved with Ray's errors translated; counts it
        as pending until it completes."""
        out: Future = _CallFuture()
        out.set_running_or_notify_cancel()
        with self._lock:
            self._pending += 1
        ray_future = ref.future()
        # Keep the ObjectRef alive until its result is in (Ray frees the object otherwise).
        ray_future.add_done_callback(lambda f, ref=ref: self._resolve(f, out))
        return out

    def _resolve(self, ray_future: Future, out: Future) -> None:
        try:
            err = ray_future.exception()
            result = None if err is not None else ray_future.result()
        except BaseException as exc:  # cancelled, or the result could not be deserialized
            err, result = exc, None
        if err is not None:
            err = self._translate(err)
        # Idle before the Future resolves: whoever wakes up on it may hand this runner the
        # next call right away and must not find it still "busy".
        with self._lock:
            self._pending -= 1
        if err is None:
            out.set_result(result)
        else:
            out.set_exception(err)

    def _translate(self, err: BaseException) -> BaseException:
        from ray import exceptions as rex

        if isinstance(err, rex.RayTaskError):
            # The runner (or the function) raised: hand the caller the original type. (A
            # RayActorError raised *inside* the call, e.g. by an env talking to another
            # actor, lands here too and does not mean this runner died.)
            cause = getattr(err, "cause", None)
            if cause is not None and not isinstance(err, type(cause)):
                err = err.as_instanceof_cause()
            return err
        died = (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.LocalRayletDiedError)
        if isinstance(err, died):
            with self._lock:
                self._dead = True
                self.healthy = False
            error = self._died_error(err)
            error.__cause__ = err
            self.last_error = self.last_error or error
            return error
        return err

    def _died_error(self, cause: BaseException | None = None) -> EnvRunnerDiedError:
        where = f"Ray actor pid {self.pid}" if self.pid is not None else "Ray actor"
        if self._stopped and cause is None:
            return EnvRunnerDiedError(f"EnvRunner {self.index} ({where}) was stopped.")
        reason = "is gone"
        if cause is not None:
            first = str(cause).strip().splitlines()
            reason = f"died ({type(cause).__name__}: {first[0] if first else ''})"
            text = str(cause)
            if "ray.kill" in text:
                reason = "was killed (ray.kill)"
        return EnvRunnerDiedError(f"EnvRunner {self.index} ({where}) {reason}.")

    # ------------------------------------------------------------ life cycle

    def _on_ready(self, future: Future) -> None:
        if future.exception() is None:
            self._record(future.result())

    def _record(self, info: dict | None) -> None:
        info = info or {}
        self.pid = info.get("pid")
        self.node_id = info.get("node_id")

    @property
    def ready(self) -> Future:
        """Resolves once the runner is built (with what building it raised, if it failed)."""
        return self._ready

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the runner is built; re-raise whatever building it raised.

        Without a timeout this waits as long as the actor waits for resources, with a
        warning every 30 s."""
        if timeout is not None:
            self._record(self._ready.result(timeout=timeout))
            return
        waited = 0.0
        while True:
            try:
                # (Recorded here too: done-callbacks may run after result() has returned.)
                self._record(self._ready.result(timeout=SCHEDULING_WARNING_S))
                return
            except FutureTimeoutError:
                waited += SCHEDULING_WARNING_S
                cfg = self._config
                logger.warning(
                    "Ray EnvRunner %d is still not running after %.0f s. Does the cluster have the resources "
                    "it asks for (num_cpus=%s, num_gpus=%s, custom %s, placement_strategy=%s)? "
                    "ray.available_resources() shows what is free.",
                    self.index, waited, cfg.num_cpus_per_env_runner, cfg.num_gpus_per_env_runner,
                    dict(cfg.custom_resources_per_env_runner or {}), cfg.placement_strategy,
                )

    def request_stop(self) -> None:
        """Ask the actor to close its envs once the calls sent before are done, without waiting
        for it (stop() then waits): a group asks all its runners first, so they wind down together."""
        if self._stopped or self._dead or self._stop_request is not None:
            return
        try:
            self._stop_request = self.actor.stop_runner.remote()
        except Exception as err:  # Ray shut down, or the actor is gone: stop() kills what is left
            logger.debug("EnvRunner %d could not be asked to stop: %s", self.index, err)

    def stop(self, close_runner: bool = True) -> None:
        """Ask the actor to close its envs (waiting up to 5 s behind earlier calls), then kill it."""
        if self._stopped:
            return
        with self._lock:
            self._stopped = True
            self.healthy = False
        try:
            if close_runner and not self._dead:
                try:
                    request = self._stop_request if self._stop_request is not None else self.actor.stop_runner.remote()
                    self._ray.get(request, timeout=STOP_TIMEOUT_S)
                except Exception as err:  # a stuck or dead actor: killed below
                    logger.debug("EnvRunner %d did not close its envs cleanly: %s", self.index, err)
            try:
                self._ray.kill(self.actor, no_restart=True)
            except Exception:  # already gone, or Ray shut down
                pass
        finally:
            self.release_placement()

    def kill(self) -> None:
        """Kill the actor at once (`ray.kill`), as a crash would, without waiting for it.

        The handle is marked dead (unhealthy, refusing new calls) right away, so nothing sent
        after this call reaches the actor; calls already sent fail with EnvRunnerDiedError once
        Ray reports the actor gone. Not waiting matters where the actor cannot answer: one that
        was never scheduled (its node is lost, or the cluster lacks its resources) or one on a
        node that stopped responding would otherwise hold up the driver, and training with it.
        """
        try:
            self._ray.kill(self.actor, no_restart=True)
        except Exception:  # Ray shut down: the actor is gone with it
            pass
        with self._lock:
            self._dead = True
            self.healthy = False
        where = f"Ray actor pid {self.pid}" if self.pid is not None else "Ray actor"
        self.last_error = self.last_error or EnvRunnerDiedError(f"EnvRunner {self.index} ({where}) was killed "
                                                                "(ray.kill).")

    def release_placement(self) -> None:
        """Give this runner's bundle of its group's placement group back (once), so that the
        runner replacing it takes that bundle rather than reserving a placement group of its own;
        the placement group is removed with its last runner. `stop()` does it too."""
        placement, self._placement = self._placement, None
        if placement is not None:
            release_placement_group(self._config, self.index, placement)

    def __repr__(self) -> str:
        state = "busy" if self.busy else "idle"
        return f"RayEnvRunner(index={self.index}, pid={self.pid}, {state}, healthy={self.healthy})"
