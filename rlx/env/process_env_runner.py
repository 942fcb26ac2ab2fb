"""ProcessEnvRunner: an EnvRunner in its own worker process on this machine.

The driver talks to it through a pipe: each call is a function `fn(runner)` shipped with
cloudpickle (so lambdas and env creators travel), and the answer comes back pickled with
protocol 5, which moves NumPy batches as one buffer: one message per `sample()` call,
never one per step. Calls are answered in order with `concurrent.futures.Future`s, the
surface ThreadedEnvRunner and the Ray backend offer too (`submit`, `busy`, `healthy`).

Worker processes start with the "spawn" method: a fresh interpreter, safe with threads
and torch in the driver, and the same on Linux, macOS and Windows.
"""
from __future__ import annotations

import atexit
import os
import weakref
from concurrent.futures import Future
from typing import Any, Callable

from rlx.env.config_view import EnvConfig
from rlx.env.runner_host import RebuildRunner, RunnerCall, RunnerFactory, RunnerHost
from rlx.utils.errors import RLXError
from rlx.utils.spawn import describe_exit, raise_startup_error, send_reply, serve_calls
from rlx.utils.worker_process import WorkerProcess
from rlx.utils.worker_signals import ignore_stop_signals


class EnvRunnerDiedError(RLXError, RuntimeError):
    """A remote EnvRunner's process (or actor) is gone: killed, crashed or stopped."""


def _worker_main(conn: Any, payload: bytes) -> None:
    """Body of the worker process: build the runner, then answer calls until told to stop."""
    # Ctrl-C in a terminal reaches every process of the group; the driver decides what stops.
    ignore_stop_signals()
    try:
        raise_startup_error()
        import cloudpickle
        import torch

        spec = cloudpickle.loads(payload)  # imports what the runner needs, also in a spare
        torch.set_num_threads(spec["num_threads"])
        # A RebuildRunner call replaces the runner in this process (a restart in place); a spare
        # worker builds none until one adopts it (ProcessEnvRunner.adopt).
        host = RunnerHost(None, missing="it is a spare worker that was not adopted") if spec.get("spare") \
            else RunnerHost(spec["factory"]())
    except BaseException as err:  # reported to the driver as the answer to "start"
        send_reply(conn, "err", err)
        return
    send_reply(conn, "ok", os.getpid())
    serve_calls(conn, host.apply)
    try:
        host.close()
    finally:
        conn.close()


_LIVE: "weakref.WeakSet[ProcessEnvRunner]" = weakref.WeakSet()


@atexit.register
def _stop_all_at_exit() -> None:
    # Registered after multiprocessing's own exit hook, so it runs first: that hook joins
    # non-daemon children, which only exit once asked to (or once their pipe closes).
    for handle in list(_LIVE):
        handle.stop()


class ProcessEnvRunner(WorkerProcess):
    """A handle on one EnvRunner living in a worker process.

    Construction starts the process and returns at once; `wait_ready()` waits until the
    runner is built (or raises what building it raised). Calls queue behind each other.
    """

    def __init__(self, runner_cls: type, config: EnvConfig, index: int, num_workers: int, module_spec: Any = None,
                 num_threads: int = 1, spare: bool = False):
        import cloudpickle

        self.index = index
        factory = RunnerFactory(runner_cls, config, index, num_workers, module_spec)
        payload = cloudpickle.dumps({"factory": factory, "num_threads": max(1, int(num_threads)), "spare": spare})
        name = "rlx-env-runner-spare" if spare else f"rlx-env-runner-{index}"
        # Not a daemon, so that its sub-envs may run in processes of their own
        # (remote_worker_envs); _stop_all_at_exit() ends it before the interpreter exits.
        super().__init__(_worker_main, (payload,), name=name, daemon=False)
        _LIVE.add(self)

    @classmethod
    def spare(cls, runner_cls: type, config: EnvConfig, num_workers: int, module_spec: Any = None,
              num_threads: int = 1) -> "ProcessEnvRunner":
        """A started worker process without a runner: its interpreter, torch and the runner's
        modules load now, so that a restart that `adopt`s it only builds the runner."""
        return cls(runner_cls, config, -1, num_workers, module_spec, num_threads=num_threads, spare=True)

    def adopt(self, index: int, factory: RunnerFactory) -> Future:
        """Make this spare worker runner `index`: build its runner with `factory` (queued behind
        the worker's start). The Future resolves once the runner is built."""
        self.index = index
        return self.submit(RebuildRunner(factory))

    def _label(self) -> str:
        return f"EnvRunner {self.index} (pid {self.pid})"

    def _died_error(self, call: str | None) -> EnvRunnerDiedError:
        return EnvRunnerDiedError(f"EnvRunner {self.index} (process {self.pid}) {describe_exit(self._process)}.")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the runner is built; re-raise whatever building it raised."""
        self.ready.result(timeout=timeout)

    def submit(self, fn: RunnerCall) -> Future:
        """Queue `fn(runner)` in the worker; the Future holds its result or exception."""
        import cloudpickle

        return self._send_call(getattr(fn, "__name__", type(fn).__name__), cloudpickle.dumps(fn))

    def call(self, fn: Callable[[Any], Any], timeout: float | None = None) -> Any:
        """Run `fn(runner)` in the worker and return its result."""
        return self.submit(fn).result(timeout=timeout)

    def stop(self, close_runner: bool = True) -> None:  # type: ignore[override]
        """Ask the worker to close its envs and exit; kill it if it does not within 5 s."""
        _LIVE.discard(self)
        super().stop(timeout=5.0)

    def __repr__(self) -> str:
        state = "busy" if self.busy else "idle"
        return f"ProcessEnvRunner(index={self.index}, pid={self.pid}, {state}, healthy={self.healthy})"
