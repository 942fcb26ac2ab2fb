"""WorkerProcess: the driver's side of a spawn worker that answers calls over a pipe.

EnvRunner processes and learner processes both work this way: each call is one pickled
message, the worker answers them in order (see `rlx.utils.spawn.send_reply`), and a
reader thread resolves one `concurrent.futures.Future` per call. When the process ends,
every unanswered call fails with the error `_died_error()` describes.

`stop()` releases everything the handle holds in this process: the pipe end, the reader
thread, and the `multiprocessing.Process` with its two pipe fds (closed with
`Process.close()`, which multiprocessing otherwise leaves to garbage collection). A
stopped handle keeps only the worker's pid and exit code, for its error messages.
"""
from __future__ import annotations

import collections
import pickle
import threading
from concurrent.futures import Future
from typing import Any, Callable

from rlx.utils.errors import RLXError
from rlx.utils.spawn import describe_exit, spawn_pipe, start_process


class WorkerProcess:
    """Starts `target(conn, *args)` in a spawn process and talks to it through `conn`.

    The worker's first answer is to "start" (it built what it serves): `ready` resolves
    with it. Subclasses name themselves (`_label`) and say what a death means (`_died_error`).
    """

    def __init__(self, target: Callable[..., Any], args: tuple, name: str, daemon: bool = True):
        self.healthy = True
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()
        self._pending: collections.deque[tuple[str, Future]] = collections.deque()
        parent, child = spawn_pipe()
        self._conn = parent
        self.ready: Future = Future()
        self._pending.append(("start", self.ready))
        self._process: Any = start_process(target, (child, *args), name=name, daemon=daemon)
        self._pid: int | None = self._process.pid
        child.close()
        self._reader = threading.Thread(target=self._read_loop, name=f"{name}-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        """The worker process id."""
        return self._pid

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running."""
        return bool(self._pending)

    def _label(self) -> str:
        return f"worker (pid {self.pid})"

    def _died_error(self, call: str | None) -> BaseException:
        """The error unanswered calls fail with once the process is gone (subclasses use
        their own error type)."""
        during = "" if call is None else f" during {call}"
        return RLXError(f"The {self._label()} {describe_exit(self._process)}{during}.")

    def _send_call(self, call: str, data: bytes) -> Future:
        """Send one pickled call; the Future resolves with its answer, in order."""
        future: Future = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            if not self.healthy:
                future.set_exception(self._died_error(call))
                return future
            self._pending.append((call, future))
            try:
                self._conn.send_bytes(data)
            except (BrokenPipeError, OSError):
                self._pending.pop()
                future.set_exception(self._died_error(call))
        return future

    def _read_loop(self) -> None:
        while True:
            try:
                data = self._conn.recv_bytes()
            except (EOFError, OSError):
                break
            status, value, remote_tb = pickle.loads(data)
            with self._lock:
                entry = self._pending.popleft() if self._pending else None
            if entry is None:
                continue
            call, future = entry
            if status == "ok":
                future.set_result(value)
            else:
                if remote_tb and hasattr(value, "add_note"):
                    value.add_note(f"Raised in {self._label()} during {call}:\n{remote_tb}")
                future.set_exception(value)
        self._on_exit()

    def _on_exit(self) -> None:
        self._process.join(timeout=5)
        with self._lock:
            self.healthy = False
            pending = list(self._pending)
            self._pending.clear()
        self.last_error = self.last_error or self._died_error(None)
        for call, future in pending:
            if not future.done():
                future.set_exception(self._died_error(call))

    def request_stop(self) -> None:
        """Ask the worker to exit once the calls queued before are answered."""
        with self._lock:
            self.healthy = False
        # Also when a call failed (the handle is marked unhealthy): the worker itself is usually
        # still serving and exits at once, instead of being killed after stop()'s timeout.
        if self._process.is_alive():
            try:
                self._conn.send_bytes(pickle.dumps(None))
            except (BrokenPipeError, OSError):
                pass

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit, kill it when it has not within `timeout` seconds, and release
        the pipe, the reader thread and the process's file descriptors. Safe to call twice."""
        self.request_stop()
        self._process.join(timeout=timeout)
        if self._process.is_alive():
            self._process.kill()
            # SIGKILL cannot be ignored: wait until it is reaped, however loaded the machine is,
            # so no stopped worker outlives stop().
            self._process.join()
        self._release()

    def _release(self) -> None:
        """Free what the handle holds in this process once the worker is gone."""
        # The reader ends at EOF, which the worker's exit delivers; closing the pipe under a
        # reader still in recv() could hand its fd number to a file opened meanwhile.
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=5)
        if self._reader.is_alive():
            return  # the worker is somehow still connected: left to garbage collection
        try:
            self._conn.close()
        except OSError:
            pass
        if not isinstance(self._process, _ReapedProcess) and not self._process.is_alive():
            reaped = _ReapedProcess(self._process)
            self._process.close()  # closes its sentinel pipes and drops it from multiprocessing's list
            self._process = reaped

    def kill(self) -> None:
        """Kill the worker at once (SIGKILL), as a crash would; its calls then fail."""
        if self._process.is_alive():
            self._process.kill()


class _ReapedProcess:
    """What a stopped handle keeps of its `multiprocessing.Process` after `Process.close()`:
    the pid and exit code, with the Process methods its callers use (all no-ops now)."""

    def __init__(self, process: Any):
        self.pid: int | None = process.pid
        self.exitcode: int | None = process.exitcode
        self.name: str = process.name

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        return None

    def kill(self) -> None:
        return None

    terminate = kill
