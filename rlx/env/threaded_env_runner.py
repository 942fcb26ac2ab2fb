"""ThreadedEnvRunner: an in-process EnvRunner driven by its own daemon thread.

Calls are queued and answered with `concurrent.futures.Future`s, so the driver can run
several runners at once (envs and torch inference release the GIL), stop waiting for one
that hangs, and keep going. Evaluation runners use it; worker-process and Ray backends
offer the same `submit()`/`busy`/`healthy`/`ready` surface. A `RebuildRunner` call replaces
the runner on the thread (a restart in place; see rlx.env.runner_host).
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from rlx.env.runner_host import RebuildRunner, RunnerCall, RunnerHost

_STOP = object()


class ThreadedEnvRunner:
    """Runs `fn(runner)` calls for one EnvRunner, one at a time, on a dedicated thread.

    Give it the `runner`, or `runner=None` and a `factory` that builds it: then the thread
    builds it first, and `ready` (a Future, resolved at once when a runner is given) says
    when it is built or what building it raised.
    """

    def __init__(self, runner: Any, index: int, factory: Callable[[], Any] | None = None):
        self._host = RunnerHost(runner)
        self.index = index
        self.healthy = True
        self.last_error: BaseException | None = None
        self._pending = 0
        self._close_on_stop = False
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        # A daemon thread: an env stuck forever must not keep the interpreter from exiting.
        self._thread = threading.Thread(target=self._loop, name=f"rlx-env-runner-{index}", daemon=True)
        self._thread.start()
        if runner is None and factory is not None:
            self.ready: Future = self.submit(RebuildRunner(factory))
        else:
            self.ready = Future()
            self.ready.set_running_or_notify_cancel()
            self.ready.set_result(None)

    @property
    def runner(self) -> Any:
        """The EnvRunner this thread drives (None while it is being built, or when building failed)."""
        return self._host.runner

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the runner is built; re-raise whatever building it raised."""
        self.ready.result(timeout=timeout)

    def submit(self, fn: RunnerCall) -> Future:
        """Queue `fn(runner)`; the Future holds its result or exception."""
        future: Future = Future()
        with self._lock:
            self._pending += 1
        self._queue.put((fn, future))
        return future

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running (e.g. a sample that has not returned)."""
        return self._pending > 0

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                if self._close_on_stop and self.runner is not None:
                    self.runner.stop()
                return
            fn, future = item
            if not future.set_running_or_notify_cancel():
                self._done()
                continue
            try:
                result = self._host.apply(fn)
            except BaseException as err:  # handed to the caller through the Future
                # Idle before the Future resolves: whoever wakes up on it may hand this runner
                # the next call right away and must not find it still "busy".
                self._done()
                future.set_exception(err)
            else:
                self._done()
                future.set_result(result)

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1

    def stop(self, close_runner: bool = True) -> None:
        """Stop the thread after the queued calls; with `close_runner`, close the runner's envs
        now if it is idle, or else on its own thread once the running call has returned."""
        if close_runner and not self.busy:
            if self.runner is not None:
                self.runner.stop()
        else:
            self._close_on_stop = close_runner
        self._queue.put(_STOP)

    def __repr__(self) -> str:
        state = "busy" if self.busy else "idle"
        return f"ThreadedEnvRunner(index={self.index}, {state}, healthy={self.healthy})"
