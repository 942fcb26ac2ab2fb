"""What an EnvRunnerGroup does about a runner that does not answer in time.

A remote runner that hangs past its deadline is killed and reported as failed (with a hint
when batch_mode='complete_episodes' may be the cause); the runner in the driver's own process
cannot be killed, so the driver stops waiting for it after sample_timeout_s and raises.
"""
from __future__ import annotations

from concurrent.futures import Future, TimeoutError as FutureTimeoutError
from typing import Any, Callable

from rlx.env.runner_restarts import EnvRunnerFailureError


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


class LocalSampleBound:
    """Bounds the local EnvRunner's sample() calls by `timeout_s` (sample_timeout_s), as a
    remote runner's are.

    A remote runner that hangs is killed after sample_timeout_s; the runner in the driver's own
    process cannot be killed, so its calls run on the runner's own thread (a
    ThreadedEnvRunner) and the driver stops waiting once the call has made no progress (no env
    step or reset done) for `timeout_s`, raising an error that says so. A call that is slow but
    stepping is never cut short (RLlib does not bound the local runner at all). The stuck call
    keeps its thread until it returns; until then every further call fails at once with the
    same error (the runner is not free). Without a timeout (None or 0) calls run on the
    caller's thread, unbounded.
    """

    def __init__(self, timeout_s: float | None, batch_mode: str):
        self._timeout_s = float(timeout_s or 0.0)
        self._batch_mode = batch_mode
        #: The call that ran past the timeout, while it has not returned.
        self._stuck: Future | None = None

    @property
    def bounded(self) -> bool:
        """Whether calls are bounded (sample_timeout_s is set)."""
        return self._timeout_s > 0

    def run(self, handle: Any, fn: Callable[[Any], Any], progress: Callable[[], int]) -> Any:
        """`fn(runner)` on `handle` (the local runner's thread), waiting while `progress()` (a
        count of the runner's env steps and resets) moves at least once per timeout."""
        if self._stuck is not None and not self._stuck.done():
            raise self._error(f"made no progress for sample_timeout_s={self._timeout_s:g} s and is still running")
        self._stuck = None
        future = handle.submit(fn)
        seen = progress()
        while True:
            try:
                return future.result(timeout=self._timeout_s)
            except FutureTimeoutError:
                now = progress()
                if now == seen:
                    self._stuck = future
                    raise self._error(f"made no progress (no env step or reset returned) within "
                                      f"sample_timeout_s={self._timeout_s:g} s") from None
                seen = now

    def _error(self, what: str) -> EnvRunnerFailureError:
        return EnvRunnerFailureError(
            f"The local EnvRunner's sample() {what}; is an env's step() or reset() stuck? rlx cannot stop a "
            f"call in the driver's own process: it keeps the runner busy until it returns. Fix the env, raise "
            f"sample_timeout_s (None: no bound), or sample with remote runners (num_env_runners > 0), which are "
            f"stopped and restarted when they hang.{complete_episodes_hint(self._batch_mode)}")
