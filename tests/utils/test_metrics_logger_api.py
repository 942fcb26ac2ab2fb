"""MetricsLogger at RLlib 2.60's API, used as RLlib's docs and example algorithms use it:
root loggers, aggregate() of parallel loggers' reduce() results, log_time, RLlib 2.60's
reduce names, peek/reduce options, state round trips and tuple keys."""
import math
import time

import numpy as np
import pytest

from rlx.utils.metrics.metrics_logger import MetricsLogger


def test_root_logger_aggregates_parallel_loggers():
    root = MetricsLogger(root=True)
    learners = [MetricsLogger(), MetricsLogger()]
    learners[0].log_value("loss", 0.1, reduce="mean", window=10)
    learners[0].log_value("loss", 0.2, reduce="mean", window=10)
    learners[1].log_value("loss", 0.3, reduce="mean", window=10)
    results = [learner.reduce() for learner in learners]
    root.aggregate(results)
    # The window mean over what both loggers logged (RLlib 2.60 takes the mean of the
    # loggers' means, 0.225; rlx pools the raw window values).
    assert root.peek("loss") == pytest.approx(0.2)
    # reduce() leaves are Stats (as in RLlib 2.60) that read as numbers.
    assert results[0]["loss"] == pytest.approx(0.15) and float(results[1]["loss"]) == 0.3
    plain = MetricsLogger(root=True)
    plain.aggregate([{"loss": 0.15}, {"loss": 0.3}])  # plain values: one sample each
    assert plain.peek("loss") == pytest.approx(0.225)
    assert root.is_root and not learners[0].is_root


def test_aggregate_under_key_with_stats_objects():
    root = MetricsLogger(root=True)
    runner = MetricsLogger()
    runner.log_value(("episode", "return"), 10.0, reduce="max")
    runner.log_value(("episode", "return"), 30.0, reduce="max")
    root.aggregate([runner.reduce(compile=False)], key="env_runners")
    assert root.peek(("env_runners", "episode", "return")) == 30.0
    assert root.peek("env_runners", "episode") == {"return": 30.0}


def test_lifetime_sum_root_keeps_sources_clear():
    root = MetricsLogger(root=True)
    runners = [MetricsLogger(), MetricsLogger()]
    for _ in range(2):  # two training iterations
        runners[0].log_value("num_env_steps_sampled_lifetime", 100, reduce="lifetime_sum")
        runners[1].log_value("num_env_steps_sampled_lifetime", 50, reduce="lifetime_sum")
        root.aggregate([r.reduce(compile=False) for r in runners])
        root.reduce()
    assert root.peek("num_env_steps_sampled_lifetime") == 300
    # The sources counted only since their last reduce.
    assert runners[0].peek("num_env_steps_sampled_lifetime") == 0
    assert root.peek("num_env_steps_sampled_lifetime", latest_merged_only=True) == 150


def test_ema_and_item_reduce_names():
    logger = MetricsLogger()
    logger.log_value("ema", 1.0, reduce="ema", ema_coeff=0.5)
    logger.log_value("ema", 3.0, reduce="ema", ema_coeff=0.5)
    assert logger.peek("ema") == pytest.approx(2.0)
    logger.log_value("default_ema", 1.0, ema_coeff=0.1)
    logger.log_value("default_ema", 2.0, ema_coeff=0.1)
    assert logger.peek("default_ema") == pytest.approx(1.1)
    logger.log_value("last", "a", reduce="item")
    logger.log_value("last", "b", reduce="item")
    assert logger.peek("last") == "b"
    assert logger.reduce()["last"] == "b"
    assert logger.peek("last") is None
    logger.log_value("series", 1, reduce="item_series")
    logger.log_value("series", 2, reduce="item_series")
    assert logger.peek("series") == [1, 2]


def test_unsupported_reduce_options_raise_clearly():
    logger = MetricsLogger()
    with pytest.raises(ValueError, match="percentiles"):
        logger.log_value("p", 1.0, reduce="percentiles", window=10)
    with pytest.raises(ValueError, match="takes no window"):
        logger.log_value("e", 1.0, reduce="ema", window=10)
    with pytest.raises(ValueError, match="with_throughput"):
        logger.log_value("t", 1.0, reduce="mean", window=3, with_throughput=True)


def test_log_time_measures_a_with_block():
    logger = MetricsLogger()
    for _ in range(2):
        with logger.log_time(("timers", "sample"), reduce="mean", window=5):
            time.sleep(0.01)
    seconds = logger.peek(("timers", "sample"))
    assert 0.009 < seconds < 1.0
    with logger.log_time("ema_timer"):
        pass
    assert logger.peek("ema_timer") >= 0.0


def test_peek_options():
    logger = MetricsLogger()
    logger.log_value(("a", "b"), 2.0, window=3)
    logger.log_value("c", 5, reduce="sum", with_throughput=True)
    assert logger.peek() == {"a": {"b": 2.0}, "c": 5}
    assert logger.peek(("a", "b"), compile=False) == [2.0]
    assert logger.peek("missing", default=7) == 7
    assert logger.peek(("a", "missing"), 0) == 0  # RLlib's positional default
    with pytest.raises(KeyError):
        logger.peek("missing")
    assert logger.peek("c", throughput=True) > 0
    compiled = logger.compile()
    assert compiled["c"] == 5 and compiled["c_throughput"] > 0


def test_reduce_compile_false_returns_stats_that_read_as_numbers():
    logger = MetricsLogger()
    logger.log_value("loss", 0.5, window=10)
    results = logger.reduce(compile=False)
    stats = results["loss"]
    assert float(stats) == 0.5 and stats == 0.5 and stats < 1.0 and f"{stats:.1f}" == "0.5"
    assert MetricsLogger.peek_results(results) == {"loss": 0.5}
    from rlx.utils.test_utils import check

    check(results, {"loss": 0.5})  # RLlib's tests compare reduce() results this way


def test_state_round_trip_with_tuple_keys():
    logger = MetricsLogger(root=True)
    logger.log_value(("learners", "default_policy", "loss"), np.float32(1.5), window=4)
    logger.log_value("steps", 10, reduce="lifetime_sum")
    logger.reduce()
    restored = MetricsLogger(root=True)
    restored.set_state(logger.get_state())
    restored.log_value("steps", 5, reduce="lifetime_sum")
    assert restored.peek("steps") == 15
    assert restored.peek(("learners", "default_policy", "loss")) == 1.5
    assert ("learners", "default_policy") in restored


def test_delete_key_error_flag():
    logger = MetricsLogger()
    logger.log_value("x", 1.0)
    logger.delete("x")
    logger.delete("x", key_error=False)
    with pytest.raises(KeyError):
        logger.delete("x")


def test_log_dict_merges_stats_leaves():
    source = MetricsLogger()
    source.log_value("r", 1.0, reduce="min")
    target = MetricsLogger()
    target.log_dict({"nested": source.reduce(compile=False)})
    target.log_dict({"plain": {"x": 4.0}}, reduce="max")
    assert target.peek(("nested", "r")) == 1.0
    assert target.peek(("plain", "x")) == 4.0
    assert math.isnan(MetricsLogger().peek("nothing", default=math.nan))


def test_root_reports_the_sources_ema_each_iteration():
    root = MetricsLogger(root=True)
    runner = MetricsLogger()
    reported = []
    for value in (10.0, 20.0, 30.0):
        runner.log_value("custom", value, ema_coeff=0.5)
        root.aggregate([runner.reduce()], key="env_runners")
        reported.append(root.reduce(compile=True)["env_runners"]["custom"])
    # The runner's own EMA each iteration (10, 15, 22.5), not smoothed a second time.
    assert reported == pytest.approx([10.0, 15.0, 22.5])
