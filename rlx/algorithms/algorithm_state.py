"""An Algorithm's own state (`Algorithm.get_state` / `set_state`): counters, clocks, the
episode window, metrics, learner extras and the local EnvRunner's state, as JSON-safe values.

`set_state` checks every number before it changes anything; a field that does not fit raises
`StateFieldError` naming it (checkpoint loading turns that into a CheckpointError naming the file).
"""
from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any, Iterator

from rlx.algorithms.results import histogram_values, is_real_number

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm


class StateFieldError(ValueError):
    """A field of an algorithm state (`Algorithm.set_state`) does not fit; `field` names it
    (dot-separated), `reason` says why."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"state field '{field}': {reason}")
        self.field = field
        self.reason = reason


@contextlib.contextmanager
def state_field(name: str) -> Iterator[None]:
    """Report an error while restoring state field `name` as a StateFieldError naming it."""
    try:
        yield
    except StateFieldError as err:
        raise StateFieldError(f"{name}.{err.field}", err.reason) from err
    except Exception as err:
        raise StateFieldError(name, f"{type(err).__name__}: {err}") from err


def state_count(state: Any, name: str) -> int:
    """`state[name]` as a non-negative integer count, or a StateFieldError naming it."""
    with state_field(name):
        value = state[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or value != int(value) or value > 2**62:
            raise ValueError(f"{value!r:.40} is not a count")
        return int(value)


def check_metrics_state(state: Any) -> None:
    """Raise a StateFieldError naming the entry when a stored MetricsLogger state (from
    `MetricsLogger.get_state()`) is not one: keys are lists of strings, and the values and
    accumulator of a reducing stat are numbers (anything else fails at the next reduce)."""
    stats = state.get("stats") if isinstance(state, dict) else None
    if not isinstance(stats, list):
        raise StateFieldError("stats", "not a list of stats")
    for i, entry in enumerate(stats):
        if not isinstance(entry, dict):
            raise StateFieldError(f"stats[{i}]", f"{entry!r:.60} is not a stat")
        key = entry.get("key")
        if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key):
            raise StateFieldError(f"stats[{i}].key", f"{key!r:.60} is not a list of names")
        values, acc = entry.get("values"), entry.get("acc")
        if values is not None and not isinstance(values, list):
            raise StateFieldError(f"stats[{i}].values", f"{values!r:.60} is not a list")
        if entry.get("reduce") is not None:
            for value in [*(values or []), *([] if acc is None else [acc])]:
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise StateFieldError(f"stats[{i}].values", f"{value!r:.60} is not a number")


def numeric_extras(extras: tuple[dict, dict] | None) -> list[dict] | None:
    """An episode's (custom_metrics, hist_data) as JSON: the metrics that are numbers and the
    histogram data that are numbers (what the results summarize); None without."""
    if extras is None:
        return None
    metrics, hist = extras
    saved_hist = {}
    for key, values in hist.items():
        values = histogram_values(values)
        if all(is_real_number(x) for x in values):
            saved_hist[str(key)] = [float(x) for x in values]
    return [{str(k): float(v) for k, v in metrics.items() if is_real_number(v)}, saved_hist]


def restored_extras(saved: Any) -> tuple[dict, dict] | None:
    """`numeric_extras`' JSON back as (custom_metrics, hist_data), checked."""
    if saved is None:
        return None
    if not isinstance(saved, list) or len(saved) != 2 or not all(isinstance(d, dict) for d in saved):
        raise ValueError(f"{saved!r:.60} is not [custom_metrics, hist_data]")
    metrics, hist = saved
    return ({str(k): float(v) for k, v in metrics.items()},
            {str(k): [float(x) for x in v] for k, v in hist.items()})


def algorithm_state(algo: "Algorithm") -> dict[str, Any]:
    """JSON-safe state of `algo` (counters, metrics, learner and runner extras)."""
    return {
        "iteration": algo.iteration,
        "time_total_s": algo._time_total_s,
        "counters": dict(algo._counters),
        "episodes_window": [[float(r), int(n), [[str(pid), float(v)] for pid, v in p], numeric_extras(e)]
                            for r, n, p, e in algo._episodes_window],
        "metrics": algo.metrics.get_state(),
        "learner": algo.learner.get_extra_state(),
        "env_runner": algo.env_runner.get_state(),
    }


def set_algorithm_state(algo: "Algorithm", state: dict[str, Any]) -> None:
    """Restore what `algorithm_state` returned into `algo`; RLlib's partial form
    `{"learner_group": {"learner": {"rl_module": {module_id: weights}}}}` sets just those
    modules' weights (and syncs the EnvRunners)."""
    if "learner_group" in state and "iteration" not in state:
        with state_field("learner_group.learner.rl_module"):
            weights = dict(state["learner_group"]["learner"]["rl_module"])
        algo.set_weights(weights)  # {module_id: weights}, or a single-agent run's plain weights
        return
    iteration = state_count(state, "iteration")
    with state_field("time_total_s"):
        time_total = float(state["time_total_s"])
        if not math.isfinite(time_total) or time_total < 0:
            raise ValueError(f"{time_total} is not a duration")
    with state_field("counters"):
        counters = {str(k): state_count(state["counters"], k) for k in dict(state["counters"])}
    with state_field("episodes_window"):
        window = [(float(e[0]), int(e[1]), tuple((str(pid), float(v)) for pid, v in (e[2] if len(e) > 2 else ())),
                   restored_extras(e[3] if len(e) > 3 else None))
                  for e in state["episodes_window"]]
    algo.iteration = iteration
    algo._time_total_s = time_total
    algo._counters.update(counters)
    algo._episodes_window.clear()
    algo._episodes_window.extend(window)
    if "metrics" in state:
        with state_field("metrics"):
            check_metrics_state(state["metrics"])
            algo.metrics.set_state(state["metrics"])
    with state_field("learner"):
        algo.learner.set_extra_state(state["learner"])
    with state_field("env_runner"):
        algo.env_runner.set_state(state["env_runner"])
    if algo.env_runner_group.num_remote_env_runners():
        # The remote runners sample next: they start from the restored filter statistics too.
        algo.env_runner_group.sync_filters(algo.env_runner)
    algo._iterations_since_restore = 0
    algo._time_since_restore = 0.0
