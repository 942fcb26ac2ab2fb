"""MetricsLogger: RLlib's reduce semantics, nested keys, merging and state (values by hand)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rlx.utils.metrics import MetricsLogger, Stats
from rlx.utils.metrics.metrics_logger import DEFAULT_EMA_COEFF


@pytest.fixture
def logger() -> MetricsLogger:
    return MetricsLogger()


# -- reduce modes -----------------------------------------------------------------------------


def test_window_mean(logger):
    for v in (1.0, 2.0, 3.0, 4.0):
        logger.log_value("m", v, reduce="mean", window=3)
    assert logger.peek("m") == pytest.approx(3.0)  # (2 + 3 + 4) / 3


def test_ema_default_coeff_is_001(logger):
    assert DEFAULT_EMA_COEFF == 0.01
    logger.log_value("m", 10.0)
    assert logger.peek("m") == 10.0  # the first value initialises the EMA
    logger.log_value("m", 20.0)
    assert logger.peek("m") == pytest.approx(0.99 * 10.0 + 0.01 * 20.0)  # 10.1
    logger.log_value("m", 0.0)
    assert logger.peek("m") == pytest.approx(0.99 * 10.1)


def test_ema_custom_coeff(logger):
    for v in (4.0, 8.0, 0.0):
        logger.log_value("m", v, ema_coeff=0.5)
    # 4 -> 0.5*4 + 0.5*8 = 6 -> 0.5*6 + 0.5*0 = 3
    assert logger.peek("m") == pytest.approx(3.0)


def test_window_and_ema_coeff_together_is_error(logger):
    with pytest.raises(ValueError, match=r"window.*ema_coeff"):
        logger.log_value("m", 1.0, window=5, ema_coeff=0.1)


@pytest.mark.parametrize("method, window, expected", [
    ("min", None, -1.0), ("max", None, 7.0), ("min", 2, 2.0), ("max", 2, 5.0),
])
def test_min_max(logger, method, window, expected):
    for v in (3.0, 7.0, -1.0, 5.0, 2.0):
        logger.log_value("x", v, reduce=method, window=window)
    assert logger.peek("x") == expected


def test_min_max_since_last_clear(logger):
    for v in (1.0, 9.0):
        logger.log_value("x", v, reduce="max", clear_on_reduce=True)
    assert logger.reduce() == {"x": 9.0}
    logger.log_value("x", 4.0, reduce="max", clear_on_reduce=True)
    assert logger.reduce() == {"x": 4.0}


def test_window_sum(logger):
    for v in (1, 2, 3, 4):
        logger.log_value("s", v, reduce="sum", window=2)
    assert logger.peek("s") == 7


def test_lifetime_sum_survives_reduce(logger):
    logger.log_value("steps", 10, reduce="sum")
    logger.log_value("steps", 5, reduce="sum")
    assert logger.reduce() == {"steps": 15}
    logger.log_value("steps", 1, reduce="sum")
    assert logger.reduce() == {"steps": 16}


def test_clear_on_reduce(logger):
    logger.log_value("s", 3, reduce="sum", clear_on_reduce=True)
    logger.log_value("s", 4, reduce="sum", clear_on_reduce=True)
    logger.log_value("m", 2.0, window=10, clear_on_reduce=True)
    logger.log_value("keep", 2.0, window=10)
    assert logger.reduce() == {"s": 7, "m": 2.0, "keep": 2.0}
    assert logger.peek("s") == 0
    assert math.isnan(logger.peek("m"))
    assert logger.peek("keep") == 2.0
    logger.log_value("s", 1, reduce="sum", clear_on_reduce=True)
    assert logger.reduce()["s"] == 1


def test_reduce_none_keeps_list_since_last_reduce(logger):
    logger.log_value("ret", 1.0, reduce=None)
    logger.log_value("ret", 2.5, reduce=None)
    assert logger.peek("ret") == [1.0, 2.5]
    assert logger.reduce() == {"ret": [1.0, 2.5]}
    logger.log_value("ret", 7.0, reduce=None)
    assert logger.reduce() == {"ret": [7.0]}


def test_reduce_none_with_window_keeps_last_values(logger):
    for v in (1, 2, 3):
        logger.log_value("r", v, reduce=None, window=2)
    assert logger.reduce() == {"r": [2, 3]}


def test_peek_does_not_reset(logger):
    logger.log_value("s", 5, reduce="sum", clear_on_reduce=True)
    assert logger.peek("s") == 5
    assert logger.peek("s") == 5
    assert logger.reduce() == {"s": 5}


def test_peek_missing_key(logger):
    logger.log_value("episode_return_mean", 1.0)
    assert logger.peek("nope", default=-1) == -1
    with pytest.raises(KeyError, match="Did you mean 'episode_return_mean'"):
        logger.peek("episode_return_maen")


# -- keys -------------------------------------------------------------------------------------


def test_nested_tuple_keys(logger):
    logger.log_value(("env_runners", "episode_len_mean"), 10.0, window=5)
    logger.log_value(("env_runners", "num_episodes"), 2, reduce="sum")
    logger.log_value("top", 1.0, window=1)
    assert logger.peek(("env_runners", "episode_len_mean")) == 10.0
    assert logger.peek("env_runners", "num_episodes") == 2
    assert logger.peek("env_runners") == {"episode_len_mean": 10.0, "num_episodes": 2}
    assert ("env_runners", "num_episodes") in logger
    assert "env_runners" in logger
    assert "top" in logger
    assert "missing" not in logger
    assert logger.reduce() == {
        "env_runners": {"episode_len_mean": 10.0, "num_episodes": 2},
        "top": 1.0,
    }


def test_leaf_and_branch_clash(logger):
    logger.log_value("a", 1.0)
    with pytest.raises(ValueError, match="clashes"):
        logger.log_value(("a", "b"), 1.0)


def test_log_dict(logger):
    logger.log_dict({"a": {"b": 1, "c": 2}, "d": 3}, key="learner", reduce="sum")
    logger.log_dict({"a": {"b": 10}}, key="learner", reduce="sum")
    assert logger.reduce() == {"learner": {"a": {"b": 11, "c": 2}, "d": 3}}


def test_reduce_subkey(logger):
    logger.log_value(("a", "x"), 1, reduce="sum", clear_on_reduce=True)
    logger.log_value(("b", "y"), 2, reduce="sum", clear_on_reduce=True)
    assert logger.reduce("a") == {"x": 1}
    assert logger.peek("a", "x") == 0
    assert logger.peek("b", "y") == 2


def test_delete_and_reset(logger):
    logger.log_value(("a", "x"), 1.0)
    logger.log_value(("a", "y"), 1.0)
    logger.log_value("b", 1.0)
    logger.delete("a", "x")
    assert ("a", "x") not in logger and ("a", "y") in logger
    logger.delete("a")
    assert "a" not in logger
    with pytest.raises(KeyError):
        logger.delete("a")
    logger.reset()
    assert "b" not in logger
    assert logger.reduce() == {}


# -- errors -----------------------------------------------------------------------------------


def test_relog_with_other_settings_is_error(logger):
    logger.log_value("k", 1.0, reduce="mean", window=10)
    with pytest.raises(ValueError) as info:
        logger.log_value("k", 1.0, reduce="sum")
    msg = str(info.value)
    assert "'k'" in msg and "reduce='mean'" in msg and "reduce='sum'" in msg and "window=10" in msg


def test_relog_with_explicit_default_ema_is_fine(logger):
    logger.log_value("k", 1.0)
    logger.log_value("k", 3.0, ema_coeff=0.01)
    assert logger.peek("k") == pytest.approx(0.99 * 1.0 + 0.01 * 3.0)


def test_bad_reduce_name(logger):
    with pytest.raises(ValueError) as info:
        logger.log_value("k", 1.0, reduce="maen")
    msg = str(info.value)
    assert "'mean', 'min', 'max', 'sum' or None" in msg
    assert "Did you mean 'mean'?" in msg
    assert "k" not in logger


# -- value types ------------------------------------------------------------------------------


def test_torch_and_numpy_scalars(logger):
    logger.log_value("t", torch.tensor(2.0), window=10)
    logger.log_value("t", np.float32(4.0), window=10)
    logger.log_value("n", np.int64(3), reduce="sum")
    logger.log_value("n", torch.tensor(4), reduce="sum")
    assert logger.peek("t") == pytest.approx(3.0)
    assert logger.peek("n") == 7
    state = logger.get_state()
    assert all(type(v) in (int, float) for e in state["stats"] for v in (e["values"] or [e["acc"]]))
    json.dumps(state)


def test_seed_004_usage(logger):
    metrics_logger = logger
    for v in (0.3, 0.5):
        metrics_logger.log_value("theta1_mean", v, reduce="mean", window=50)
    assert metrics_logger.peek("theta1_mean") == pytest.approx(0.4)
    assert metrics_logger.reduce() == {"theta1_mean": pytest.approx(0.4)}


# -- merging ----------------------------------------------------------------------------------


def _runner(values, **kwargs) -> MetricsLogger:
    m = MetricsLogger()
    for v in values:
        m.log_value("x", v, **kwargs)
    return m


def test_merge_window_means_pool_raw_values():
    a = _runner([1.0, 2.0], window=10)
    b = _runner([3.0], window=10)
    results = [a.reduce(return_stats_objects=True), b.reduce(return_stats_objects=True)]
    assert isinstance(results[0]["x"], Stats)
    main = MetricsLogger()
    main.merge_and_log_n_dicts(results, key="env_runners", window=10)
    assert main.peek("env_runners", "x") == pytest.approx(2.0)  # (1 + 2 + 3) / 3, not 2.25


def test_merge_plain_dicts_count_each_value_once():
    a = _runner([1.0, 2.0], window=10)
    b = _runner([3.0], window=10)
    main = MetricsLogger()
    main.merge_and_log_n_dicts([a.reduce(compile=True), b.reduce(compile=True)], window=10)
    assert main.peek("x") == pytest.approx((1.5 + 3.0) / 2)


def test_merge_window_keeps_newest_of_each_source():
    a = _runner([1.0, 2.0, 3.0], window=3)
    b = _runner([10.0, 20.0, 30.0], window=3)
    main = MetricsLogger()
    main.merge_and_log_n_dicts(
        [a.reduce(return_stats_objects=True), b.reduce(return_stats_objects=True)], window=3
    )
    # Newest first, in turn: 3, 30, 2 -> window mean 35 / 3.
    assert main.peek("x") == pytest.approx(35.0 / 3)


def test_merge_sums_add_into_lifetime_counter():
    # Runner loggers export what was logged since their last export (reduce + reset), so a
    # sum without clear_on_reduce accumulates a lifetime total on the receiving side.
    main = MetricsLogger()
    for _ in range(2):
        runners = [_runner([1, 2], reduce="sum"), _runner([4], reduce="sum")]
        main.merge_and_log_n_dicts([r.reduce(return_stats_objects=True) for r in runners])
    assert main.reduce()["x"] == 14  # 2 * (1 + 2 + 4)
    main.merge_and_log_n_dicts([{"x": 6}, {"x": 1}], reduce="sum")
    assert main.peek("x") == 21


def test_merge_adopts_settings_of_stats_leaves():
    main = MetricsLogger()
    for _ in range(2):
        runners = [_runner([1, 2], reduce="sum", clear_on_reduce=True), _runner([4], reduce="sum", clear_on_reduce=True)]
        main.merge_and_log_n_dicts([r.reduce(return_stats_objects=True) for r in runners])
        assert main.reduce()["x"] == 7  # per-iteration sum: clear_on_reduce travels with the Stats
    windowed = _runner([1.0, 2.0, 3.0], window=2)
    main.merge_and_log_n_dicts([windowed.reduce(return_stats_objects=True)], key="y")
    assert main.peek("y", "x") == 2.5  # the window of 2 came along with the Stats


@pytest.mark.parametrize("method, expected", [("min", -2.0), ("max", 8.0)])
def test_merge_min_max(method, expected):
    a = _runner([5.0, -2.0], reduce=method)
    b = _runner([8.0, 0.0], reduce=method)
    main = MetricsLogger()
    main.merge_and_log_n_dicts([a.reduce(return_stats_objects=True), b.reduce()], reduce=method)
    assert main.peek("x") == expected


def test_merge_ema_takes_mean_of_sources():
    main = MetricsLogger()
    main.merge_and_log_n_dicts([{"x": 2.0}, {"x": 4.0}])
    assert main.peek("x") == pytest.approx(3.0)
    main.merge_and_log_n_dicts([{"x": 13.0}])
    # As in RLlib 2.60: the mean of everything merged since the last reduce (the sources'
    # values are EMAs already)...
    assert main.peek("x") == pytest.approx((2.0 + 4.0 + 13.0) / 3)
    assert main.reduce(compile=True)["x"] == pytest.approx((2.0 + 4.0 + 13.0) / 3)
    # ... and after a reduce, the mean of what the next merge brings.
    main.merge_and_log_n_dicts([{"x": 7.0}])
    assert main.peek("x") == pytest.approx(7.0)


def test_merge_reduce_none_lists():
    main = MetricsLogger()
    main.merge_and_log_n_dicts([{"r": [1.0, 2.0]}, {"r": [3.0]}], reduce=None)
    assert main.reduce() == {"r": [1.0, 2.0, 3.0]}


def test_merge_stats_with_other_reduce_is_error():
    a = _runner([1.0], reduce="max")
    main = MetricsLogger()
    main.log_value("x", 2.0, reduce="sum")
    with pytest.raises(ValueError, match="reduce='max'"):
        main.merge_and_log_n_dicts([a.reduce(return_stats_objects=True)])


def test_return_stats_objects_snapshot_before_clear():
    a = _runner([1.0, 3.0], window=5, clear_on_reduce=True)
    out = a.reduce(return_stats_objects=True)
    assert out["x"].peek() == pytest.approx(2.0)
    assert math.isnan(a.peek("x"))


# -- state ------------------------------------------------------------------------------------


def test_state_round_trip_through_json(logger):
    logger.log_value(("a", "mean"), 1.0, window=3)
    logger.log_value(("a", "mean"), 5.0, window=3)
    logger.log_value("ema", 2.0, ema_coeff=0.5)
    logger.log_value("steps", 7, reduce="sum")
    logger.log_value("rets", 1.5, reduce=None)
    state = json.loads(json.dumps(logger.get_state()))
    restored = MetricsLogger()
    restored.set_state(state)
    assert restored.reduce() == {"a": {"mean": 3.0}, "ema": 2.0, "steps": 7, "rets": [1.5]}
    # The window and EMA carry on as if nothing happened.
    restored.log_value(("a", "mean"), 9.0, window=3)
    restored.log_value(("a", "mean"), 12.0, window=3)
    restored.log_value("ema", 4.0, ema_coeff=0.5)
    assert restored.peek("a", "mean") == pytest.approx((5.0 + 9.0 + 12.0) / 3)
    assert restored.peek("ema") == pytest.approx(3.0)
    with pytest.raises(ValueError):
        restored.log_value("steps", 1, reduce="max")
