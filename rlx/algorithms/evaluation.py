"""Evaluation during training: schedules episodes or timesteps over evaluation EnvRunners.

Follows seed 000 "Customized Evaluation During Training":

* episodes are spread over the runners round by round, one episode per sub-env, the
  remainder going to the first runners (10 episodes on 7 runners: a round of 7, then a
  round of 3 on runners 1-3);
* timesteps are split evenly, rounded up to a multiple of the runner count;
* `evaluation_duration="auto"` (parallel evaluation only) runs rounds until the
  concurrent training step has finished;
* with `enable_async_evaluation`, work is not done in rounds: every idle runner takes the
  next unit, a failed runner's unit goes back into the queue, and once the queue is empty
  idle runners also take copies of units still running elsewhere, so one stuck runner
  cannot hold up the evaluation (the first finished copy counts).

Runners are handles with `submit(fn) -> Future` (threads of the driver, or Ray actors when
the training runners are Ray actors), so the driver can stop waiting for a runner that hangs
(`evaluation_sample_timeout_s`) and carry on.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable

from rlx.offline.runner_output import record_runner_sample
from rlx.utils.errors import EnvError

logger = logging.getLogger("rlx")


@dataclass
class EvaluationOutcome:
    """What one evaluation collected: each finished unit's runner metrics (dicts of Stats)."""

    metrics: list[dict] = field(default_factory=list)
    units_done: int = 0
    failed_runner_indices: list[int] = field(default_factory=list)
    #: Indices of the runners that finished at least one unit.
    delivered_runner_indices: list[int] = field(default_factory=list)
    timed_out: bool = False


@dataclass
class EvaluationPlan:
    """How much to evaluate and how: `duration` in `unit`s ('episodes' or 'timesteps'), or
    `duration="auto"` until `stop_event` is set."""

    duration: int | str
    unit: str
    num_envs_per_runner: int
    auto_timesteps_per_unit: int
    timeout_s: float
    asynchronous: bool = False
    tolerate_failures: bool = False
    stop_event: threading.Event | None = None
    #: The directory `output="logdir"` writes the evaluation samples to (the Algorithm's log dir).
    output_log_dir: str | None = None

    @property
    def auto(self) -> bool:
        """Whether evaluation lasts as long as the concurrent training step."""
        return self.duration == "auto"

    def should_stop(self) -> bool:
        """For `auto`: whether the training step is over. Without a training step to wait for
        (a direct `evaluate()` call) that is at once, so each runner runs one unit."""
        return self.stop_event is None or self.stop_event.is_set()


def _unit_fn(unit: str, amount: int, output_log_dir: str | None = None) -> Callable[[Any], dict]:
    """The function an evaluation runner runs for one unit: sample it, write the samples into
    the config's `output` (when set; rlx.offline.runner_output), return the runner's metrics."""
    if unit == "episodes":
        def run(runner: Any) -> dict:
            record_runner_sample(runner, runner.sample(num_episodes=amount), True, output_log_dir)
            return runner.get_metrics()
    else:
        def run(runner: Any) -> dict:
            record_runner_sample(runner, runner.sample(num_timesteps=amount), False, output_log_dir)
            return runner.get_metrics()
    return run


def run_evaluation(handles: list[Any], plan: EvaluationPlan) -> EvaluationOutcome:
    """Evaluate on `handles` (runner handles: threads or Ray actors) according to `plan`.

    `handles` are the runners that were given the weights to evaluate. A runner left out
    because it was still busy (stuck in an earlier evaluation) is not used even if it becomes
    free meanwhile: it holds older weights.
    """
    usable = [h for h in handles if h.healthy and not h.busy]
    if not usable:
        logger.warning(
            "No evaluation EnvRunner is free (all are still busy with an earlier evaluation, or failed); "
            "skipping this evaluation. Raise evaluation_sample_timeout_s or set enable_async_evaluation=True."
        )
        return EvaluationOutcome()
    what = "until the training step ends" if plan.auto else f"for {plan.duration} {plan.unit}"
    logger.info("Evaluating current policy %s.", what)
    if plan.asynchronous:
        return _run_async(handles, plan)
    return _run_rounds(handles, plan)


def _auto_amount(plan: EvaluationPlan) -> int:
    return plan.num_envs_per_runner if plan.unit == "episodes" else plan.auto_timesteps_per_unit


def _run_rounds(handles: list[Any], plan: EvaluationPlan) -> EvaluationOutcome:
    out = EvaluationOutcome()
    total = None if plan.auto else int(plan.duration)
    if total is not None and plan.unit == "timesteps":
        n = len([h for h in handles if h.healthy and not h.busy])
        rounded = math.ceil(total / n) * n
        if rounded != total:
            logger.info("Rounding evaluation_duration=%d timesteps up to %d, a multiple of the %d evaluation runners.",
                        total, rounded, n)
        total = rounded
    round_idx = 0
    while True:
        if plan.auto and round_idx > 0 and plan.should_stop():
            break
        if total is not None and out.units_done >= total:
            break
        idle = [h for h in handles if h.healthy and not h.busy]
        if not idle:
            _no_runner_left(handles, out)
            break
        jobs: list[tuple[Any, int, Future]] = []
        remaining = None if total is None else total - out.units_done
        for h in idle:
            if remaining is None or total is None:  # (both None together: duration="auto")
                amount = _auto_amount(plan)
            elif plan.unit == "episodes":
                amount = min(plan.num_envs_per_runner, remaining)
            else:
                amount = min(math.ceil((total - out.units_done) / len(idle)), remaining)
            if amount <= 0:
                break
            if remaining is not None:
                remaining -= amount
            jobs.append((h, amount, h.submit(_unit_fn(plan.unit, amount, plan.output_log_dir))))
        planned = out.units_done + sum(a for _, a, _ in jobs)
        logger.info("Running round %d of parallel evaluation (%d/%s %s)", round_idx, planned,
                    "auto" if total is None else total, plan.unit)
        done, pending = wait([f for _, _, f in jobs], timeout=plan.timeout_s)
        for h, amount, f in jobs:
            if f not in done:
                continue
            err = f.exception()
            if err is not None:
                _runner_failed(h, err, plan, out)
                continue
            out.metrics.append(f.result())
            out.units_done += amount
            out.delivered_runner_indices.append(h.index)
        if pending:
            out.timed_out = True
            _warn_timeout(plan, out, total, len(pending))
            break
        round_idx += 1
    return out


def _run_async(handles: list[Any], plan: EvaluationPlan) -> EvaluationOutcome:
    out = EvaluationOutcome()
    if plan.auto:
        queue: list[tuple[int, int]] = []
        total = None
    else:
        total = int(plan.duration)
        if plan.unit == "episodes":
            size = plan.num_envs_per_runner
            amounts = [min(size, total - start) for start in range(0, total, size)]
        else:
            n = len([h for h in handles if h.healthy and not h.busy])
            amounts = [math.ceil(total / n)] * n
            total = sum(amounts)
        queue = list(enumerate(amounts))
    completed: set[int] = set()
    in_flight: dict[Future, tuple[Any, int, int]] = {}
    next_uid = len(queue)
    last_progress = time.monotonic()
    while True:
        stopping = plan.auto and plan.should_stop() and next_uid > 0
        busy_handles = {h for h, _, _ in in_flight.values()}
        for h in handles:
            if not h.healthy or h.busy or h in busy_handles:
                continue
            if queue:
                uid, amount = queue.pop(0)
            elif plan.auto and not stopping:
                uid, amount = next_uid, _auto_amount(plan)
                next_uid += 1
            else:
                # Nothing left to start: help with a unit still running on another runner.
                running = [(uid, amount) for _, uid, amount in in_flight.values() if uid not in completed]
                if not running or plan.auto:
                    continue
                uid, amount = running[0]
            in_flight[h.submit(_unit_fn(plan.unit, amount, plan.output_log_dir))] = (h, uid, amount)
            busy_handles.add(h)
        if total is not None and len(completed) == len(amounts):
            break
        if not in_flight:
            if not any(h.healthy for h in handles):
                _no_runner_left(handles, out)
            break
        timeout = max(0.0, plan.timeout_s - (time.monotonic() - last_progress))
        done, _ = wait(list(in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
        if not done:
            out.timed_out = True
            _warn_timeout(plan, out, total, len(in_flight))
            break
        for f in done:
            h, uid, amount = in_flight.pop(f)
            err = f.exception()
            if err is not None:
                _runner_failed(h, err, plan, out, asynchronous=True)
                if uid not in completed and all(u != uid for _, u, _ in in_flight.values()):
                    queue.insert(0, (uid, amount))
                continue
            if uid in completed:
                continue  # a copy of this unit finished first on another runner
            completed.add(uid)
            out.metrics.append(f.result())
            out.units_done += amount
            out.delivered_runner_indices.append(h.index)
            last_progress = time.monotonic()
    return out


def add_off_policy_estimates(algorithm: Any, results: dict[str, Any]) -> None:
    """Add `off_policy_estimator: {name: {v_behavior, v_target, v_gain, ...}}` to an evaluation's
    results when the evaluation config sets off_policy_estimation_methods (rlx.offline.estimators)."""
    cfg = algorithm.evaluation_config
    if not (cfg.off_policy_estimation_methods or cfg.input_evaluation):
        return
    from rlx.offline.estimators.evaluation import off_policy_estimates

    estimates = off_policy_estimates(algorithm)
    if estimates is not None:
        results["off_policy_estimator"] = estimates


def _runner_failed(handle: Any, err: BaseException, plan: EvaluationPlan, out: EvaluationOutcome,
                   asynchronous: bool = False) -> None:
    if not (plan.tolerate_failures or asynchronous):
        raise err
    handle.healthy = False
    out.failed_runner_indices.append(handle.index)
    logger.warning("Evaluation EnvRunner %d failed (%s: %s)%s.", handle.index, type(err).__name__, err,
                   "; another runner takes over its work" if asynchronous else "")
    handle.last_error = err


def _no_runner_left(handles: list[Any], out: EvaluationOutcome) -> None:
    errors = [getattr(h, "last_error", None) for h in handles if not h.healthy]
    errors = [e for e in errors if e is not None]
    if errors and not any(h.healthy for h in handles):
        raise EnvError(
            f"All {len(handles)} evaluation EnvRunners failed; the last error was "
            f"{type(errors[-1]).__name__}: {errors[-1]}"
        ) from errors[-1]
    logger.warning("No evaluation EnvRunner is free to continue; reporting what was collected so far.")


def _warn_timeout(plan: EvaluationPlan, out: EvaluationOutcome, total: int | None, num_waiting: int) -> None:
    goal = "" if total is None else f"/{total}"
    logger.warning(
        "Evaluation stopped waiting after evaluation_sample_timeout_s=%s s: %d evaluation EnvRunner(s) had not "
        "returned (%d%s %s done); the results cover only what finished. A runner may be stuck in a slow "
        "env step or in an episode that does not end. To fix: make sure the env's episodes end (e.g. "
        "with a time limit), raise evaluation_sample_timeout_s, set evaluation_duration_unit='timesteps' "
        "(a runner then returns after a fixed number of steps) or a lower evaluation_duration, or set "
        "enable_async_evaluation=True so idle runners take over a stuck runner's work.",
        plan.timeout_s, num_waiting, out.units_done, goal, plan.unit,
    )
