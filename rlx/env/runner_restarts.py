"""Fault tolerance of an EnvRunnerGroup's remote runners: failures, restarts, giving up.

Every remote runner has a slot that is in one of four states:

- "up": in service; sampling, weight syncs and metrics go to it.
- "waiting": it failed and waits out its restart delay (the others sample meanwhile).
- "starting": its replacement is being built, beside training: a new EnvRunner object in the
  same worker when the old one only raised (its env failed; see RunnerHost), a new worker
  process or Ray actor when the old one died or hung. Nothing waits for it; it joins the
  sampling once it is built and has the current weights, filter and exploration state.
- "down": it is not restarted (restart_failed_env_runners is off, max_num_env_runner_restarts
  was reached, or it failed too often in a row with ignore_env_runner_failures on).

Restart delays back off only on repeated failures. A runner's *streak* counts its failures
since it last delivered an env step (a partial fragment counts). The first failure of a runner
that had sampled (streak 1) is restarted at once; a runner that fails again without sampling
waits 1/8, 1/4, 1/2 and then all of `delay_between_env_runner_restarts_s`. A runner whose
streak exceeds `min(num_consecutive_env_runner_failures_tolerance, 5)` is broken (e.g. its env
fails on every start): train() raises its error, or with ignore_env_runner_failures the group
carries on without it. While no runner is up, restarts do not wait for their delay: something
must sample. Every wait is bounded: by `env_runner_health_probe_timeout_s` for building a
restarted runner, by `env_runner_restore_timeout_s` for giving it the current state.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait as wait_futures
from dataclasses import dataclass
from typing import Any

from rlx.env.config_view import EnvConfig
from rlx.utils.errors import RLXError

logger = logging.getLogger("rlx")

#: The most failures in a row without a sampled step that one runner is allowed (fewer when
#: num_consecutive_env_runner_failures_tolerance is smaller).
MAX_FAILURES_WITHOUT_PROGRESS = 5

UP, WAITING, STARTING, DOWN = "up", "waiting", "starting", "down"


class EnvRunnerFailureError(RLXError, RuntimeError):
    """Remote EnvRunners failed beyond what the fault-tolerance settings allow."""


class RestartPolicy:
    """What the fault-tolerance settings of a config allow (see the module docstring)."""

    def __init__(self, config: EnvConfig):
        self.restart = bool(config.restart_failed_env_runners)
        self.ignore = bool(config.ignore_env_runner_failures)
        self.max_restarts = int(config.max_num_env_runner_restarts)
        self.delay_s = float(config.delay_between_env_runner_restarts_s or 0.0)
        self.tolerance = int(config.num_consecutive_env_runner_failures_tolerance)
        self.max_streak = min(self.tolerance, MAX_FAILURES_WITHOUT_PROGRESS)
        self.start_timeout_s = float(config.env_runner_health_probe_timeout_s or 0.0) or None
        self.restore_timeout_s = float(config.env_runner_restore_timeout_s or 0.0) or None

    @property
    def tolerates_failures(self) -> bool:
        """Whether a failed runner leaves the others sampling (else its error is raised)."""
        return self.restart or self.ignore

    def delay_before_restart(self, streak: int) -> float:
        """Seconds a runner waits before its restart after its `streak`-th failure in a row."""
        if streak <= 1:
            return 0.0
        return self.delay_s * min(1.0, 2.0 ** (streak - 2) / 8.0)


@dataclass
class _Slot:
    index: int
    state: str = UP
    #: Failures since the runner last delivered an env step.
    streak: int = 0
    #: Restarts of this runner so far (max_num_env_runner_restarts bounds them).
    restarts: int = 0
    #: WAITING: when the restart may start.
    due_at: float = 0.0
    #: STARTING: resolves once the replacement is built; its deadline (None: none).
    started: Future | None = None
    deadline: float | None = None
    #: Whether the worker is alive and only the runner in it failed (restart in place).
    in_place: bool = False
    #: STARTING: whether a new worker (process, actor, thread) is being started.
    new_worker: bool = False
    #: UP after a restart: the call giving it the current weights and state, and its deadline.
    restore: Future | None = None
    restore_deadline: float | None = None
    error: BaseException | None = None


class RunnerSupervisor:
    """Keeps the remote runners of one EnvRunnerGroup in service (see the module docstring).

    The group reports what happened (`delivered`, `failed`) and asks for the runners to use
    (`sampling_handles`); the supervisor starts restarts, promotes finished ones, and raises
    when the settings do not tolerate a failure. It uses the group's `_remote` handles,
    `_start_replacement(index, in_place)` (returns the Future of the new runner's build) and
    `_runner_restarted(index)` (queues the current weights and state for a new runner; returns
    that call's Future, or None).
    """

    def __init__(self, group: Any):
        self.group = group
        self.policy = RestartPolicy(group.config)
        self.slots: dict[int, _Slot] = {h.index: _Slot(h.index) for h in group._remote}
        self._restarted: list[int] = []
        self._last_error: BaseException | None = None

    # ------------------------------------------------------------ queries

    def is_up(self, handle: Any) -> bool:
        """Whether `handle` is in service (alive and not failed)."""
        slot = self.slots.get(handle.index)
        return bool(handle.healthy) and (slot is None or slot.state == UP)

    def up_handles(self) -> list[Any]:
        """The handles in service, in index order."""
        return [h for h in self.group._remote if self.is_up(h)]

    def num_waiting_for_restart(self) -> int:
        """Failed runners that will be back: waiting out their delay or being built."""
        return sum(1 for s in self.slots.values() if s.state in (WAITING, STARTING))

    def starting_futures(self) -> list[Future]:
        """The Futures of the restarts in progress (they resolve once the runner is built)."""
        return [s.started for s in self.slots.values() if s.state == STARTING and s.started is not None]

    def take_restarted(self) -> list[int]:
        """Indices of the runners that came back since the last call."""
        out, self._restarted = self._restarted, []
        return out

    # ------------------------------------------------------------ events

    def delivered(self, index: int) -> None:
        """Runner `index` sampled env steps: its next failure is a first one again."""
        slot = self.slots.get(index)
        if slot is not None:
            slot.streak = 0

    def failed(self, handle: Any, err: BaseException, hung: bool = False, worker_kept: bool = True) -> None:
        """Runner `handle` failed (raised, died, or `hung` and was killed). Schedule its restart,
        or drop it, or raise, as the settings say. Without `worker_kept` the worker is not
        reused even if it still answers (it failed to start and is on its way out)."""
        slot = self.slots.setdefault(handle.index, _Slot(handle.index))
        if slot.state in (WAITING, DOWN):
            return
        slot.streak += 1
        slot.error = self._last_error = err
        slot.started = slot.restore = None
        slot.in_place = worker_kept and not hung and bool(handle.healthy)
        handle.last_error = err
        self.group._forget_requests(handle.index)
        policy = self.policy
        what = f"EnvRunner {handle.index} failed ({type(err).__name__}: {_first_line(err)})"
        if not policy.tolerates_failures:
            slot.state = DOWN
            raise err
        if slot.streak > policy.max_streak:
            slot.state = DOWN
            if not policy.ignore:
                times = "once" if slot.streak == 1 else f"{slot.streak} times in a row without sampling in between"
                raise EnvRunnerFailureError(
                    f"EnvRunner {handle.index} failed {times}; giving up on it (num_consecutive_env_runner_failures_"
                    f"tolerance={policy.tolerance}; at most {MAX_FAILURES_WITHOUT_PROGRESS} failures in a row are "
                    f"tolerated). Its last error: {type(err).__name__}: {err}") from err
            logger.warning("%s, %d times in a row without sampling; continuing without it "
                           "(ignore_env_runner_failures).", what, slot.streak)
            return
        if not policy.restart or slot.restarts >= policy.max_restarts:
            slot.state = DOWN
            why = "ignore_env_runner_failures" if not policy.restart else \
                f"max_num_env_runner_restarts={policy.max_restarts} reached"
            logger.warning("%s; continuing without it (%s).", what, why)
            return
        delay = policy.delay_before_restart(slot.streak)
        slot.state = WAITING
        slot.due_at = time.monotonic() + delay
        when = "now" if delay == 0 else f"in {delay:g} s (failure {slot.streak} in a row without sampling)"
        logger.warning("%s; restarting it %s, the others sample meanwhile.", what, when)
        if delay == 0:
            self._start(slot)

    def replaced(self, index: int) -> None:
        """Runner `index` was replaced outside the supervisor (EnvRunnerGroup.recreate_runner)."""
        slot = self.slots.setdefault(index, _Slot(index))
        slot.state, slot.started = UP, None

    # ------------------------------------------------------------ progress

    def advance(self) -> None:
        """Start the restarts that are due, put the runners built meanwhile into service and fail
        those not built within env_runner_health_probe_timeout_s. Never waits."""
        self._notice_deaths()
        now = time.monotonic()
        for slot in list(self.slots.values()):
            if slot.state == WAITING and now >= slot.due_at:
                self._start(slot)
            if slot.state == STARTING:
                self._check_start(slot, now)
            if slot.state == UP and slot.restore is not None:
                self._check_restore(slot, now)

    def sampling_handles(self) -> list[Any]:
        """The runners to sample with now. When none is up, waits (bounded) for one to be
        restarted, ignoring restart delays; raises when none can come back."""
        self.advance()
        while True:
            handles = self.up_handles()
            if handles:
                return handles
            pending = [s for s in self.slots.values() if s.state in (WAITING, STARTING)]
            if not pending:
                raise EnvRunnerFailureError(
                    "Every remote EnvRunner has failed and none may be restarted (restart_failed_env_runners is "
                    "off, max_num_env_runner_restarts was reached, or they failed too often in a row)."
                    + (f" The last error: {type(self._last_error).__name__}: {self._last_error}"
                       if self._last_error is not None else "")) from self._last_error
            for slot in pending:
                if slot.state == WAITING:
                    logger.warning("No EnvRunner is up: restarting EnvRunner %d now rather than in %.1f s.",
                                   slot.index, max(0.0, slot.due_at - time.monotonic()))
                    self._start(slot)
            self._wait_for_starts(first_only=True)
            self.advance()

    def probe(self, timeout_s: float | None = None) -> list[int]:
        """Restart every failed runner now (ignoring delays), wait up to `timeout_s` seconds
        (default env_runner_health_probe_timeout_s) for them, and return the indices of those
        back in service."""
        before = len(self._restarted)
        self.advance()
        for slot in list(self.slots.values()):
            if slot.state == WAITING:
                self._start(slot)
        self._wait_for_starts(first_only=False, timeout_s=timeout_s)
        self.advance()
        return self._restarted[before:]

    # ------------------------------------------------------------ internals

    def _notice_deaths(self) -> None:
        """Runners that died between calls (their process was killed) fail like any other."""
        for handle in list(self.group._remote):
            slot = self.slots.get(handle.index)
            if slot is not None and slot.state == UP and not handle.healthy:
                err = getattr(handle, "last_error", None) or EnvRunnerFailureError(f"EnvRunner {handle.index} died.")
                self.failed(handle, err)

    def _start(self, slot: _Slot) -> None:
        old = self._handle(slot.index)
        slot.restarts += 1
        self.group.num_remote_worker_restarts += 1
        try:
            started = self.group._start_replacement(slot.index, slot.in_place)
        except Exception as err:  # e.g. Ray could not create the actor
            started = Future()
            started.set_running_or_notify_cancel()
            started.set_exception(err)
        slot.state, slot.started = STARTING, started
        slot.new_worker = self._handle(slot.index) is not old
        timeout = self.policy.start_timeout_s
        slot.deadline = None if timeout is None else time.monotonic() + timeout

    def _check_start(self, slot: _Slot, now: float) -> None:
        handle = self._handle(slot.index)
        started = slot.started
        if started is not None and started.done():
            err = started.exception()
            if err is None and handle.healthy:
                slot.state, slot.started = UP, None
                slot.restore = self.group._runner_restarted(slot.index)
                timeout = self.policy.restore_timeout_s
                slot.restore_deadline = None if timeout is None else now + timeout
                self._restarted.append(slot.index)
                logger.info("EnvRunner %d is back in service.", slot.index)
            else:
                self.failed(handle, err or EnvRunnerFailureError(f"EnvRunner {slot.index} died while starting."),
                            worker_kept=not slot.new_worker)
        elif slot.deadline is not None and now > slot.deadline:
            kill = getattr(handle, "kill", None)
            if kill is not None:
                kill()
            self.failed(handle, EnvRunnerFailureError(
                f"The restarted EnvRunner {slot.index} was not built within env_runner_health_probe_timeout_s="
                f"{self.policy.start_timeout_s:g} s; it was stopped."), hung=True)

    def _check_restore(self, slot: _Slot, now: float) -> None:
        """A restarted runner that could not take the current weights and state (in
        env_runner_restore_timeout_s) fails like any other."""
        restore = slot.restore
        if restore is None:
            return
        if restore.done():
            slot.restore = None
            err = restore.exception()
            if err is not None:
                self.failed(self._handle(slot.index), err)
        elif slot.restore_deadline is not None and now > slot.restore_deadline:
            slot.restore = None
            handle = self._handle(slot.index)
            kill = getattr(handle, "kill", None)
            if kill is not None:
                kill()
            self.failed(handle, EnvRunnerFailureError(
                f"The restarted EnvRunner {slot.index} did not take the current weights and state within "
                f"env_runner_restore_timeout_s={self.policy.restore_timeout_s:g} s; it was stopped."), hung=True)

    def _wait_for_starts(self, first_only: bool, timeout_s: float | None = None) -> None:
        """Wait until one (or every) restart in progress has finished, at most until the
        earliest start deadline or `timeout_s`."""
        starting = [s for s in self.slots.values() if s.state == STARTING and s.started is not None]
        started = [s.started for s in starting if s.started is not None]
        if not starting:
            return
        limits = [s.deadline for s in starting if s.deadline is not None]
        if timeout_s is not None:
            limits.append(time.monotonic() + timeout_s)
        timeout = None if not limits else max(0.0, min(limits) - time.monotonic()) + 0.01
        wait_futures(started, timeout=timeout,
                     return_when=FIRST_COMPLETED if first_only else "ALL_COMPLETED")

    def _handle(self, index: int) -> Any:
        return next(h for h in self.group._remote if h.index == index)


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else ""
