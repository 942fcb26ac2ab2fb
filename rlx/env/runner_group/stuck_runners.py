"""What an EnvRunnerGroup does about a runner that does not answer in time.

A remote runner that hangs past its deadline is killed and reported as failed (with a hint
when batch_mode='complete_episodes' may be the cause); the runner in the driver's own process
cannot be killed, so a watchdog thread warns about it instead.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from rlx.env.runner_restarts import EnvRunnerFailureError

logger = logging.getLogger("rlx")


def complete_episodes_hint(batch_mode: str) -> str:
    """Why a runner may hang with batch_mode='complete_episodes' and what to do ("" otherwise)."""
    if batch_mode != "complete_episodes":
        return ""
    return (" With batch_mode='complete_episodes' a runner samples until every episode has ended: an env "
            "whose episodes never end (no terminated/truncated, no time limit) keeps it sampling forever. "
            "Wrap the env in gymnasium.wrappers.TimeLimit or use batch_mode='truncate_episodes'.")


def kill(handle: Any) -> None:
    """Stop a runner handle at once, where its backend can (a thread cannot be killed)."""
    kill_now = getattr(handle, "kill", None)
    if kill_now is not None:
        kill_now()


def stop_stuck(handle: Any, what: str, timeout: float, batch_mode: str) -> EnvRunnerFailureError:
    """Kill runner `handle`, which did not answer `what` within `timeout` seconds, and return the
    error to report its failure with."""
    kill(handle)
    return EnvRunnerFailureError(
        f"EnvRunner {handle.index} did not answer {what} within {timeout:g} s; is an env stuck? The runner "
        f"was stopped.{complete_episodes_hint(batch_mode)}")


class LocalSampleWatchdog:
    """Warns once per sample() call of the local EnvRunner that has not returned after `timeout_s`.

    A remote runner that hangs is killed after sample_timeout_s; the runner in the driver's
    own process cannot be, so at least the user learns why training does not move on. One
    thread (started on first use, ended by `close()`) watches every call; entering and
    leaving a call costs two attribute writes.
    """

    def __init__(self, timeout_s: float | None, batch_mode: str):
        self._timeout_s = float(timeout_s or 0.0)
        self._batch_mode = batch_mode
        self._calls = 0
        #: (number of the running call, when it started), or None between calls.
        self._running: tuple[int, float] | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "LocalSampleWatchdog":
        if self._timeout_s > 0 and not self._closed.is_set():
            self._calls += 1
            self._running = (self._calls, time.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="rlx-local-sample-watchdog", daemon=True)
                self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._running = None

    def _watch(self) -> None:
        warned = 0
        delay = self._timeout_s
        while not self._closed.wait(delay):
            running, delay = self._running, self._timeout_s
            if running is None or running[0] == warned:
                continue
            elapsed = time.monotonic() - running[1]
            if elapsed < self._timeout_s:
                delay = self._timeout_s - elapsed
                continue
            warned = running[0]
            logger.warning(
                "The local EnvRunner's sample() has not returned after sample_timeout_s=%g s. rlx cannot stop a "
                "runner in the driver's own process and keeps waiting; is an env's step() or reset() stuck?%s",
                self._timeout_s, complete_episodes_hint(self._batch_mode))

    def close(self) -> None:
        """End the watching thread."""
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
