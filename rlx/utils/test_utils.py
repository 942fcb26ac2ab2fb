"""Test helpers of RLlib's `ray.rllib.utils.test_utils`, for example scripts and tests.

* `check(x, y)`: nested structures (dicts, lists, tuples, arrays, tensors, numbers,
  strings) equal up to `decimals` digits, or `atol`/`rtol`; `false=True` checks that
  they differ. Raises AssertionError.
* `check_learning_achieved(results, min_value)`: raises unless some trial reached a
  mean episode return (or another metric) of `min_value`.
* `check_train_results_new_api_stack(result)` / `check_train_results(result)`: the
  structure of an `algo.train()` result.
* `add_rllib_example_script_args`, `run_rllib_example_script_experiment` and
  `should_stop` moved to `rlx.examples.utils` (as in RLlib); the names here still work,
  with a deprecation warning.
"""
from __future__ import annotations

import logging
import math
import sys
from typing import Any

import numpy as np

import rlx.examples.utils as example_utils
from rlx.cli.stop import canonical_key, lookup
from rlx.utils.metrics import ENV_RUNNER_RESULTS, EVALUATION_RESULTS, FAULT_TOLERANCE_STATS, LEARNER_RESULTS, Stats

__all__ = [
    "add_rllib_example_script_args",
    "check",
    "check_learning_achieved",
    "check_train_results",
    "check_train_results_new_api_stack",
    "run_rllib_example_script_experiment",
    "should_stop",
]

logger = logging.getLogger(__name__)

TRAINING_ITERATION = "training_iteration"
_DEFAULT_POLICY = "default_policy"
_warned: set[str] = set()


def _moved(name: str) -> Any:
    if name not in _warned:
        _warned.add(name)
        logger.warning("DeprecationWarning: `rlx.utils.test_utils.%s` has been deprecated. Use "
                       "`rlx.examples.utils.%s` instead.", name, name)
    return getattr(example_utils, name)


def add_rllib_example_script_args(*args: Any, **kwargs: Any) -> Any:
    """Deprecated: moved to `rlx.examples.utils.add_rllib_example_script_args`."""
    return _moved("add_rllib_example_script_args")(*args, **kwargs)


def should_stop(*args: Any, **kwargs: Any) -> Any:
    """Deprecated: moved to `rlx.examples.utils.should_stop`."""
    return _moved("should_stop")(*args, **kwargs)


def run_rllib_example_script_experiment(*args: Any, **kwargs: Any) -> Any:
    """Deprecated: moved to `rlx.examples.utils.run_rllib_example_script_experiment`."""
    return _moved("run_rllib_example_script_experiment")(*args, **kwargs)


# ---------------------------------------------------------------------- check


def check(x: Any, y: Any, decimals: int = 5, atol: float | None = None, rtol: float | None = None,
          false: bool = False) -> None:
    """Assert that `x` equals the expected `y`: dicts key by key (same keys), lists and
    tuples item by item (same length; a list may match a tuple), bools by truth, None,
    strings and ints exactly, everything else numerically (NumPy arrays, torch tensors,
    Stats, floats, an int against a float) up to `decimals` digits after the point, or
    within `atol`/`rtol` when either is given (defaults 0 and 1e-7). With `false=True`,
    assert that they are NOT the same. Raises AssertionError."""
    if isinstance(x, dict):
        assert isinstance(y, dict), f"ERROR: If x is dict, y needs to be a dict as well! y={y!r}"
        missing_in_x = set(y.keys())
        for key, value in x.items():
            assert key in y, f"ERROR: y does not have x's key='{key}'! y={y}"
            check(value, y[key], decimals=decimals, atol=atol, rtol=rtol, false=false)
            missing_in_x.discard(key)
        assert not missing_in_x, f"ERROR: y contains keys ({sorted(map(str, missing_in_x))}) that are not in x! y={y}"
    elif isinstance(x, (tuple, list)):
        assert isinstance(y, (tuple, list)), f"ERROR: If x is tuple/list, y needs to be a tuple/list as well! y={y!r}"
        assert len(y) == len(x), f"ERROR: y does not have the same length as x ({len(y)} vs {len(x)})!"
        for item_x, item_y in zip(x, y):
            check(item_x, item_y, decimals=decimals, atol=atol, rtol=rtol, false=false)
    elif isinstance(x, (bool, np.bool_)):
        if false:
            assert bool(x) is not bool(y), f"ERROR: x ({x}) is y ({y})!"
        else:
            assert bool(x) is bool(y), f"ERROR: x ({x}) is not y ({y})!"
    elif x is None or y is None or isinstance(x, str) or (isinstance(x, int) and isinstance(y, int)):
        if false:
            assert x != y, f"ERROR: x ({x}) is the same as y ({y})!"
        else:
            assert x == y, f"ERROR: x ({x}) is not the same as y ({y})!"
    elif isinstance(x, bytes) or (hasattr(x, "dtype") and (x.dtype == object or str(x.dtype).startswith("<U"))):
        _compare(lambda: np.testing.assert_array_equal(x, y), x, y, false)
    else:
        x, y = _numeric(x), _numeric(y)
        if atol is None and rtol is None:
            _compare(lambda: np.testing.assert_almost_equal(x, y, decimal=decimals), x, y, false)
        else:
            _compare(lambda: np.testing.assert_allclose(x, y, atol=0 if atol is None else atol,
                                                        rtol=1e-7 if rtol is None else rtol), x, y, false)


def _compare(assertion: Any, x: Any, y: Any, false: bool) -> None:
    try:
        assertion()
    except AssertionError:
        if not false:
            raise
    else:
        if false:
            raise AssertionError(f"ERROR: x ({x}) is the same as y ({y})!")


def _numeric(value: Any) -> Any:
    """A torch tensor as a NumPy array, a Stats object as its reduced value."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, Stats):
        return value.peek()
    return value


# ---------------------------------------------------------------------- results


def check_learning_achieved(
    tune_results: Any,
    min_value: float,
    evaluation: bool | None = None,
    metric: str = f"{ENV_RUNNER_RESULTS}/episode_return_mean",
) -> None:
    """Raise ValueError unless some trial of `tune_results` reached `min_value` in `metric`.

    Args:
        tune_results: What `tune.Tuner().fit()` returned (a ResultGrid), or results of
            plain runs: one `algo.train()` result dict or a list of them.
        min_value: The value that at least one trial's last result must reach.
        evaluation: True: check `evaluation/<metric>`; False: `<metric>`; None: the
            evaluation value where a result has one, else the training value.
        metric: The result key, nested keys written 'a/b'.
    """
    recorded = []
    for row in _result_rows(tune_results):
        eval_key = f"{EVALUATION_RESULTS}/{metric}"
        use_eval = evaluation or (evaluation is None and _has(row, eval_key))
        recorded.append(_row_value(row, eval_key if use_eval else metric))
    numbers = [float(v) for v in recorded if _is_number(v)]
    best = max(numbers) if numbers else math.nan
    if not numbers or best < min_value:
        raise ValueError(f"`{metric}` of {min_value} not reached! Best value reached is {best}.")
    print(f"`{metric}` of {min_value} reached! ok")


def _result_rows(results: Any) -> list[Any]:
    if hasattr(results, "get_dataframe"):  # ResultGrid
        return [row for _, row in results.get_dataframe().iterrows()]
    if hasattr(results, "dataframe"):  # ExperimentAnalysis (tune.run)
        return [row for _, row in results.dataframe().iterrows()]
    if isinstance(results, dict):
        return [results]
    if isinstance(results, (list, tuple)):
        return list(results)
    raise TypeError(f"check_learning_achieved needs Tune's results or train() result dicts, got {results!r}.")


def _has(row: Any, key: str) -> bool:
    value = _row_value(row, key)
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _row_value(row: Any, key: str) -> Any:
    if isinstance(row, dict):
        value = lookup(row, key)
        return lookup(row, canonical_key(key)) if value is None else value
    if key in row:  # a flat DataFrame row
        return row[key]
    return row.get(canonical_key(key))


def _is_number(value: Any) -> bool:
    try:
        return not isinstance(value, (bool, str)) and not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def check_train_results_new_api_stack(train_results: dict[str, Any]) -> dict[str, Any]:
    """Assert the structure of an `algo.train()` result: the sections env_runners,
    fault_tolerance and learners and training_iteration exist, `config` (when reported) is
    a plain dict, a single-agent run reports learner stats under 'default_policy', and each
    module's *_min / *_max stats are scalars. Returns the result."""
    for key in (ENV_RUNNER_RESULTS, FAULT_TOLERANCE_STATS, LEARNER_RESULTS, TRAINING_ITERATION):
        assert key in train_results, f"'{key}' not found in `train_results` ({train_results})!"
    _check_config(train_results)
    learner_results = train_results[LEARNER_RESULTS]
    if not _reports_several_modules(train_results, learner_results):
        assert len(learner_results) == 0 or _DEFAULT_POLICY in learner_results, (
            f"'{_DEFAULT_POLICY}' not found in train_results['{LEARNER_RESULTS}']!"
        )
    for module_id, module_metrics in learner_results.items():
        if module_id == "__all_modules__" or not isinstance(module_metrics, dict):
            continue
        for key, value in module_metrics.items():
            if key.endswith("_min") or key.endswith("_max"):
                assert np.isscalar(value), f"'{key}' value not a scalar ({value})!"
    return train_results


def check_train_results(train_results: dict[str, Any]) -> dict[str, Any]:
    """Assert the old-API-stack structure of an `algo.train()` result (the names rlx also
    reports for old code): custom_metrics, env_runners, info (with learner stats and the
    trained step count), iteration and time counters; episode statistics under
    env_runners; learner stats under 'default_policy' for a single-agent run, *_min / *_max
    (and min_* / max_*) stats scalars. Returns the result."""
    for key in ("custom_metrics", ENV_RUNNER_RESULTS, "info", "iterations_since_restore", "time_since_restore",
                "time_this_iter_s", "time_total_s", TRAINING_ITERATION, "episode_reward_mean", "episode_len_mean",
                "hist_stats", "policy_reward_mean"):
        assert key in train_results, f"'{key}' not found in `train_results` ({train_results})!"
    for key in ("episode_len_mean", "episode_return_max", "episode_return_mean", "episode_return_min",
                "hist_stats"):
        assert key in train_results[ENV_RUNNER_RESULTS], (
            f"'{key}' not found in `train_results[{ENV_RUNNER_RESULTS!r}]` ({train_results[ENV_RUNNER_RESULTS]})!"
        )
    _check_config(train_results)
    info = train_results["info"]
    assert "learner" in info, f"'learner' not in train_results['info'] ({info})!"
    assert "num_steps_trained" in info or "num_env_steps_trained" in info, (
        f"'num_(env_)?steps_trained' not in train_results['info'] ({info})!"
    )
    learner_info = info["learner"]
    if not _reports_several_modules(train_results, learner_info):
        assert len(learner_info) == 0 or _DEFAULT_POLICY in learner_info, (
            f"'{_DEFAULT_POLICY}' not found in train_results['info']['learner'] ({learner_info})!"
        )
    for pid, policy_stats in learner_info.items():
        if pid in ("batch_count", "__all__") or not isinstance(policy_stats, dict):
            continue
        stats = policy_stats.get("learner_stats", policy_stats)
        for key, value in stats.items():
            if key.startswith(("min_", "max_")) or key.endswith(("_min", "_max")):
                assert np.isscalar(value), f"'{key}' value not a scalar ({value})!"
    return train_results


def _check_config(train_results: dict[str, Any]) -> None:
    config = train_results.get("config")
    if config is not None:
        assert isinstance(config, dict), "`config` in results not a python dict!"


def _reports_several_modules(train_results: dict[str, Any], per_module: dict[str, Any]) -> bool:
    config = train_results.get("config")
    if isinstance(config, dict) and "policies" in config:
        return config["policies"] is not None and set(config["policies"]) != {_DEFAULT_POLICY}
    runners = train_results.get(ENV_RUNNER_RESULTS) or {}
    modules = runners.get("module_episode_returns_mean") if isinstance(runners, dict) else None
    if isinstance(modules, dict) and modules:
        return set(modules) != {_DEFAULT_POLICY}
    return bool(per_module) and _DEFAULT_POLICY not in per_module
