"""The success check of an example script's experiment (--as-test, --as-release-test): which
result key must reach what, whether the run reached it, and the release-test summary."""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import time
import uuid
from typing import Any

from rlx.utils.errors import ConfigError
from rlx.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN, EVALUATION_RESULTS

logger = logging.getLogger("rlx.examples.utils")

RETURN_KEY = f"{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"
EVAL_RETURN_KEY = f"{EVALUATION_RESULTS}/{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"


def success_metric_for(success_metric: dict[str, float] | None, stop: dict[str, Any],
                       args: argparse.Namespace) -> dict[str, float]:
    """The one {result key: minimum} --as-test checks: `success_metric`, else the return
    criterion of `stop` (evaluation's first), else --stop-reward on the training return."""
    if success_metric is None:
        for key in (EVAL_RETURN_KEY, RETURN_KEY):
            if isinstance(stop, dict) and key in stop:
                return {key: stop[key]}
        return {RETURN_KEY: args.stop_reward}
    if not isinstance(success_metric, dict) or len(success_metric) != 1:
        raise ConfigError(f"success_metric must be a dict of one result key and its minimum, e.g. "
                          f"{{'{RETURN_KEY}': 150.0}}; got {success_metric!r}.")
    return success_metric


def report_success(success_metric: dict[str, float], best: float, args: argparse.Namespace, taken: float,
                   stats: dict[str, Any], status: str) -> None:
    """Say whether the success metric was reached; raise ValueError if not (--as-test), or
    write the release-test summary (--as-release-test)."""
    key, target = next(iter(success_metric.items()))
    passed = is_number(best) and best >= target
    if passed:
        print(f"`{key}` of {target} reached! ok")
    if args.as_release_test:
        stats = {k: v for k, v in stats.items() if k != "config"}
        write_release_summary({
            "time_taken": float(taken),
            "trial_states": [status],
            "last_update": float(time.time()),
            "stats": stats,
            "passed": [passed],
            "not_passed": [not passed],
            "failures": {} if passed else {status: 1},
            "success_metric": key,
            "best_value": float(best),
            "target_value": float(target),
        })
    if not passed:
        message = f"`{key}` of {target} not reached! Best value reached is {best}"
        if args.as_release_test:
            print(message)
        else:
            raise ValueError(message)


def write_release_summary(summary: dict[str, Any]) -> None:
    """Write the --as-release-test summary atomically to $TEST_OUTPUT_JSON (as RLlib's
    release tests: /tmp/release_test_output.json when unset)."""
    path = os.environ.get("TEST_OUTPUT_JSON", "/tmp/release_test_output.json")
    tmp = f"{path}.tmp.{uuid.uuid4()}"
    with open(tmp, "w") as f:
        json.dump(summary, f, default=_json_default)
    os.replace(tmp, path)
    logger.info("Wrote the release test summary to %s", path)


def _json_default(value: Any) -> Any:
    """JSON for NumPy values and anything else json cannot write."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return repr(value)


def best_in_result_grid(results: Any, key: str) -> float:
    """The best value of `key` over the trials of a Tune ResultGrid."""
    frame = results.get_dataframe()
    if key not in frame.columns:
        raise ValueError(f"`{key}` is not a result key of any trial, so the success metric cannot be checked. "
                         f"Result keys: {', '.join(sorted(map(str, frame.columns)))}.")
    values = [float(v) for v in frame[key] if is_number(v)]
    return max(values) if values else math.nan


def is_number(value: Any) -> bool:
    """Whether `value` is a number (not a bool, str or NaN)."""
    try:
        return not isinstance(value, (bool, str)) and not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def reaches(value: Any, threshold: Any) -> bool:
    """Whether `value` is a number at least `threshold`."""
    try:
        return is_number(value) and float(value) >= threshold
    except TypeError:
        return False
