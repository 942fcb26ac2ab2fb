"""What `LearnerGroup.update(...)` takes and gives beyond a batch: RLlib's minibatching options,
the learner state a `return_state=True` result carries, and the queue of `async_update=True` updates.

Async updates run one at a time, in the order queued, in a daemon thread of their group; every other
call of the group waits for them first (at most a timeout, with an error naming what waited), so it
sees every update queued before it applied.
"""
from __future__ import annotations

import concurrent.futures as cf
import queue
import sys
import threading
from concurrent.futures import Future
from typing import Any, Callable

import numpy as np

from rlx.core.learner.learner_process import LearnerGroupError

__all__ = ["LOCAL_ASYNC_UPDATE_ERROR", "RL_MODULE_STATE_AFTER_UPDATE", "AsyncUpdates", "state_for_result",
           "update_options"]


#: The key of an `update(return_state=True)` result that holds the learner state after the update
#: (RLlib's): {"rl_module": {module_id: weights}, "extra_state": {module_id: learner extra state}}.
RL_MODULE_STATE_AFTER_UPDATE = "_rl_module_state_after_update"

#: RLlib's error for `update(async_update=True)` on a local LearnerGroup (the Learner in the driver).
LOCAL_ASYNC_UPDATE_ERROR = ("Cannot call update with async_update=True when running in local mode! "
                            "Try setting config.num_learners > 0.")


def state_for_result(state: dict[str, Any]) -> Any:
    """`state` as `update(return_state=True)` hands it out: put in Ray's object store (an ObjectRef
    the caller `ray.get`s, as RLlib's) while Ray is initialised in this process, else the dict."""
    ray = sys.modules.get("ray")  # not imported: not initialised either
    if ray is not None and ray.is_initialized():
        return ray.put(state)
    return state


def update_options(num_epochs: int = 1, minibatch_size: int | None = None,
                   shuffle_batch_per_epoch: bool = False) -> dict[str, Any]:
    """`update()`'s minibatching arguments, checked, as a Learner's `_update_options` (see
    rlx.core.learner.loss_api.loss_api_update)."""
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, (int, np.integer)) or num_epochs < 1:
        raise ValueError(f"update(num_epochs={num_epochs!r}): give a whole number of passes >= 1.")
    if minibatch_size is not None and (isinstance(minibatch_size, bool) or
                                       not isinstance(minibatch_size, (int, np.integer)) or minibatch_size < 1):
        raise ValueError(f"update(minibatch_size={minibatch_size!r}): give a whole number of rows >= 1, or None "
                         "for one minibatch of the whole batch.")
    return {"num_epochs": int(num_epochs), "minibatch_size": None if minibatch_size is None else int(minibatch_size),
            "shuffle": bool(shuffle_batch_per_epoch)}


class AsyncUpdates:
    """The updates a LearnerGroup queued with `update(async_update=True)`: they run one at a time,
    in the order queued, in a daemon thread of their own.

    `collect()` hands out the results of the queued updates that finished since its last call;
    `wait()` waits (up to a timeout) until none is in flight, which every other call of the group
    does first, so that it sees every update queued before it applied.
    """

    def __init__(self, name: str):
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._in_flight: list[Future] = []
        self._uncollected: list[Future] = []

    def submit(self, job: Callable[[], Any], collect: bool = True) -> Future:
        """Queue `job()`; the Future of its result. With `collect`, `collect()` hands the result out."""
        future: Future = Future()
        with self._lock:
            self._in_flight.append(future)
            if collect:
                self._uncollected.append(future)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"rlx-async-update-{self.name}", daemon=True)
                self._thread.start()
        self._queue.put((job, future))
        return future

    def _serve(self) -> None:
        while True:
            job, future = self._queue.get()
            if job is None:
                return
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as err:  # handed to whoever collects or waits
                    future.set_exception(err)
            del job, future  # (the job holds its group: let an unused group be collected meanwhile)

    def in_worker(self) -> bool:
        """Whether the caller is the thread running the queued updates."""
        return threading.current_thread() is self._thread

    @property
    def num_in_flight(self) -> int:
        """How many queued updates have not finished."""
        with self._lock:
            return sum(not f.done() for f in self._in_flight)

    def collect(self) -> list[Any]:
        """The results of the collectable updates that finished since the last call, in the order
        queued. An update that failed raises its error here (once; the others stay for the next call)."""
        with self._lock:
            done = []
            for future in self._uncollected:
                if not future.done():
                    break
                done.append(future)
            failed = next((f for f in done if f.exception() is not None), None)
            if failed is not None:
                self._uncollected.remove(failed)
                raise _async_failure(failed, self.name)
            self._uncollected = self._uncollected[len(done):]
        return [future.result() for future in done]

    def wait(self, timeout: float, what: str, report_failures: bool = True) -> None:
        """Wait until every queued update finished (at once from the thread that runs them).

        Raises:
            LearnerGroupError: they did not finish within `timeout` seconds.
            The error of a finished update nobody collected yet (when `report_failures`).
        """
        if self.in_worker():
            return
        with self._lock:
            self._in_flight = [f for f in self._in_flight if not f.done()]
            pending = list(self._in_flight)
        if pending:
            _, not_done = cf.wait(pending, timeout=timeout)
            if not_done:
                raise LearnerGroupError(
                    f"{what} waited {timeout:g} s for the {len(pending)} async update(s) of {self.name} in flight "
                    f"(LearnerGroup.update(async_update=True)) to finish; {len(not_done)} did not. Check that the "
                    "learners are alive and the batches are not too big, or raise the group's async_wait_timeout_s.")
        if report_failures:
            with self._lock:
                failed = next((f for f in self._uncollected if f.done() and f.exception() is not None), None)
                if failed is not None:
                    self._uncollected.remove(failed)
            if failed is not None:
                raise _async_failure(failed, self.name)

    def shutdown(self) -> None:
        """Let the thread end once the updates queued so far ran."""
        with self._lock:
            if self._thread is not None:
                self._queue.put((None, None))
                self._thread = None


def _async_failure(future: Future, name: str) -> BaseException:
    """The error of a failed async update, with a note saying so."""
    error = future.exception()
    assert error is not None
    if hasattr(error, "add_note"):
        error.add_note(f"(An earlier LearnerGroup.update(async_update=True) of {name} failed with it.)")
    return error
