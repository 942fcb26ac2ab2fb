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
import collections
import multiprocessing as mp
import os
import pickle
import signal
import threading
import weakref
from concurrent.futures import Future
from typing import Any, Callable

from rlx.utils.errors import RLXError
from rlx.utils.spawn import describe_exit, send_reply, start_process


class EnvRunnerDiedError(RLXError, RuntimeError):
    """A remote EnvRunner's process (or actor) is gone: killed, crashed or stopped."""


def _worker_main(conn: Any, payload: bytes) -> None:
    """Body of the worker process: build the runner, then answer calls until told to stop."""
    # Ctrl-C in a terminal reaches every process of the group; the driver decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import cloudpickle
        import torch

        spec = cloudpickle.loads(payload)
        torch.set_num_threads(spec["num_threads"])
        runner = spec["runner_cls"](config=spec["config"], worker_index=spec["index"],
                                    num_workers=spec["num_workers"], module_spec=spec["module_spec"])
    except BaseException as err:  # reported to the driver as the answer to "start"
        send_reply(conn, "err", err)
        return
    send_reply(conn, "ok", os.getpid())
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            break  # the driver is gone
        fn = cloudpickle.loads(message)
        if fn is None:
            break
        try:
            result = fn(runner)
        except BaseException as err:
            send_reply(conn, "err", err)
        else:
            send_reply(conn, "ok", result)
    try:
        runner.stop()
    finally:
        conn.close()


_LIVE: "weakref.WeakSet[ProcessEnvRunner]" = weakref.WeakSet()


@atexit.register
def _stop_all_at_exit() -> None:
    # Registered after multiprocessing's own exit hook, so it runs first: that hook joins
    # non-daemon children, which only exit once asked to (or once their pipe closes).
    for handle in list(_LIVE):
        handle.stop()


class ProcessEnvRunner:
    """A handle on one EnvRunner living in a worker process.

    Construction starts the process and returns at once; `wait_ready()` waits until the
    runner is built (or raises what building it raised). Calls queue behind each other.
    """

    def __init__(self, runner_cls: type, config: Any, index: int, num_workers: int, module_spec: Any = None,
                 num_threads: int = 1):
        import cloudpickle

        self.index = index
        self.healthy = True
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()
        self._pending: collections.deque[Future] = collections.deque()
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        payload = cloudpickle.dumps({"runner_cls": runner_cls, "config": config, "index": index,
                                     "num_workers": num_workers, "module_spec": module_spec,
                                     "num_threads": max(1, int(num_threads))})
        self._conn = parent
        self._ready: Future = Future()
        self._pending.append(self._ready)
        # Not a daemon, so that its sub-envs may run in processes of their own
        # (remote_worker_envs); _stop_all_at_exit() ends it before the interpreter exits.
        self._process = start_process(_worker_main, (child, payload), name=f"rlx-env-runner-{index}", daemon=False)
        _LIVE.add(self)
        child.close()
        self._reader = threading.Thread(target=self._read_loop, name=f"rlx-env-runner-{index}-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        """The worker process id."""
        return self._process.pid

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the runner is built; re-raise whatever building it raised."""
        self._ready.result(timeout=timeout)

    def submit(self, fn: Callable[[Any], Any]) -> Future:
        """Queue `fn(runner)` in the worker; the Future holds its result or exception."""
        import cloudpickle

        future: Future = Future()
        future.set_running_or_notify_cancel()
        data = cloudpickle.dumps(fn)
        with self._lock:
            if not self.healthy:
                future.set_exception(self._died_error())
                return future
            self._pending.append(future)
            try:
                self._conn.send_bytes(data)
            except (BrokenPipeError, OSError):
                self._pending.remove(future)
                future.set_exception(self._died_error())
        return future

    def call(self, fn: Callable[[Any], Any], timeout: float | None = None) -> Any:
        """Run `fn(runner)` in the worker and return its result."""
        return self.submit(fn).result(timeout=timeout)

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running."""
        return bool(self._pending)

    def _read_loop(self) -> None:
        while True:
            try:
                data = self._conn.recv_bytes()
            except (EOFError, OSError):
                break
            status, value, remote_tb = pickle.loads(data)
            with self._lock:
                future = self._pending.popleft() if self._pending else None
            if future is None:
                continue
            if status == "ok":
                future.set_result(value)
            else:
                if remote_tb and hasattr(value, "add_note"):
                    value.add_note(f"Raised in EnvRunner {self.index} (pid {self.pid}):\n{remote_tb}")
                future.set_exception(value)
        self._on_exit()

    def _on_exit(self) -> None:
        self._process.join(timeout=5)
        with self._lock:
            self.healthy = False
            pending = list(self._pending)
            self._pending.clear()
        error = self._died_error()
        self.last_error = self.last_error or error
        for future in pending:
            if not future.done():
                future.set_exception(error)

    def _died_error(self) -> EnvRunnerDiedError:
        return EnvRunnerDiedError(f"EnvRunner {self.index} (process {self.pid}) {describe_exit(self._process)}.")

    def stop(self, close_runner: bool = True) -> None:
        """Ask the worker to close its envs and exit; kill it if it does not within 5 s."""
        _LIVE.discard(self)
        with self._lock:
            alive = self.healthy
            self.healthy = False
        if alive:
            try:
                self._conn.send_bytes(pickle.dumps(None))
            except (BrokenPipeError, OSError):
                pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5)
        try:
            self._conn.close()
        except OSError:
            pass

    def kill(self) -> None:
        """Kill the worker process at once (SIGKILL), as a crash would."""
        if self._process.is_alive():
            self._process.kill()

    def __repr__(self) -> str:
        state = "busy" if self.busy else "idle"
        return f"ProcessEnvRunner(index={self.index}, pid={self.pid}, {state}, healthy={self.healthy})"
