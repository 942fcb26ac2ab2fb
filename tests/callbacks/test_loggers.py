"""Result loggers: the default trial directory, result.json, params.json, progress.csv,
TensorBoard files, `logger_config`, `logger_creator`, and the logger helpers.

Expected values are always taken from the result dicts train() returned (or from the
config), never copied from an earlier run.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPO
from rlx.callbacks import RLlibCallback
from rlx.loggers import (
    CSVLogger,
    JsonLogger,
    Logger,
    NoopLogger,
    TBXLogger,
    UnifiedLogger,
    flatten_result,
    json_safe,
    pretty_print,
)
from rlx.loggers.creation import resolve_logger_class, results_root, trial_dir_name
from rlx.loggers.tensorboard_layout import tensorboard_tag
from rlx.utils.errors import ConfigError

from conftest import BATCH, small_config

TRIAL_RE = re.compile(r"^PPO_CartPole-v1_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_[0-9a-f]{6}$")


# ---------------------------------------------------------------------------- helpers


def strict_loads(text: str):
    """json.loads that fails the test on NaN / Infinity (not valid JSON)."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c!r} in {text[:200]!r}"))


def get(d: dict, path: str):
    """d['a']['b'] for path 'a/b'."""
    for part in path.split("/"):
        d = d[part]
    return d


def as_json_value(v):
    """What a result value becomes in JSON: non-finite floats are null, numpy → Python."""
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def same_number(written, expected) -> bool:
    """NaN-aware equality of a JSON-read value with a result value."""
    expected = as_json_value(expected)
    if expected is None:
        return written is None
    return written == expected


def read_lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, r, strict=True)) for r in reader]
    return header, rows


def cell_matches(cell: str, expected) -> bool:
    expected = as_json_value(expected)
    if expected is None:
        return cell == ""
    if isinstance(expected, bool):
        return cell == str(expected)
    return float(cell) == float(expected)


def train_n(algo, n: int) -> list[dict]:
    return [algo.train() for _ in range(n)]


def trial_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []


def make_cartpole(env_config):
    """A module-level env creator (serialised in params.json as 'module:qualname')."""
    return gym.make("CartPole-v1")


class MarkerCallbacks(RLlibCallback):
    """A callbacks class (serialised in params.json as 'module:qualname')."""


class RecordingLogger(Logger):
    """Keeps every result it receives; counts close() calls."""

    def _init(self) -> None:
        self.results: list[dict] = []
        self.closed = 0

    def on_result(self, result):
        self.results.append(result)

    def close(self):
        self.closed += 1


def canonical(result: dict) -> str:
    return json.dumps(json_safe(result), sort_keys=True, allow_nan=False)


# ---------------------------------------------------------------------------- default trial dir


def test_default_trial_dir_has_every_file(results_dir):
    algo = small_config().build()
    try:
        train_n(algo, 3)
        logdir = algo.logdir
    finally:
        algo.stop()
    dirs = trial_dirs(results_dir)
    assert len(dirs) == 1, dirs
    trial = dirs[0]
    assert TRIAL_RE.match(trial.name), trial.name
    assert Path(logdir).resolve() == trial.resolve()
    names = os.listdir(trial)
    for required in ("params.json", "result.json", "progress.csv"):
        assert required in names, names
    assert [n for n in names if n.startswith("events.out.tfevents.")], names


def test_logdir_read_after_stop_is_the_trial_dir_the_results_went_to(results_dir):
    # Nobody read algo.logdir while training: reading it after stop() must still name the
    # trial dir that holds the results, not start a new (empty) trial.
    algo = small_config().build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    logdir = Path(algo.logdir)
    dirs = trial_dirs(results_dir)
    assert len(dirs) == 1, [d.name for d in dirs]
    assert logdir.resolve() == dirs[0].resolve()
    lines = read_lines(logdir / "result.json")
    assert [strict_loads(ln)["training_iteration"] for ln in lines] == [result["training_iteration"]]


def test_build_alone_creates_nothing(results_dir):
    algo = small_config().build()
    algo.stop()
    assert trial_dirs(results_dir) == []
    assert not results_dir.exists() or list(results_dir.iterdir()) == []


def test_two_algos_get_distinct_trial_dirs(results_dir):
    a, b = small_config().build(), small_config().build()
    try:
        a.train()
        b.train()
        assert a.logdir != b.logdir
    finally:
        a.stop()
        b.stop()
    assert len(trial_dirs(results_dir)) == 2


# ---------------------------------------------------------------------------- result.json


def test_result_json_has_one_flushed_line_per_iteration(results_dir):
    algo = small_config().build()
    try:
        results = []
        for i in range(1, 4):
            results.append(algo.train())
            # Read without stop(): each line is on disk as soon as train() returns.
            lines = read_lines(Path(algo.logdir) / "result.json")
            assert len(lines) == i
            parsed = strict_loads(lines[-1])
            assert parsed["training_iteration"] == results[-1]["training_iteration"] == i
    finally:
        algo.stop()
    lines = read_lines(Path(algo.logdir) / "result.json")
    assert len(lines) == 3
    for line, result in zip(lines, results):
        parsed = strict_loads(line)
        assert isinstance(parsed, dict)
        assert parsed["training_iteration"] == result["training_iteration"]
        for key in ("env_runners/episode_return_mean", "num_env_steps_sampled_lifetime",
                    "env_runners/num_env_steps_sampled_lifetime", "learners/default_policy/total_loss"):
            assert same_number(get(parsed, key), get(result, key)), key
    assert [strict_loads(ln)["training_iteration"] for ln in lines] == [1, 2, 3]


def _inject_non_finite(algorithm, metrics_logger, result, **kwargs):
    result["custom_nan"] = float("nan")
    result["custom_extra"] = {"inf": float("inf"), "np_nan": np.float32("nan"),
                              "arr": np.array([1.0, np.nan, -np.inf]), "ok": np.int64(7)}


def test_nan_and_inf_are_written_as_null(results_dir):
    algo = small_config().callbacks(on_train_result=_inject_non_finite).build()
    try:
        result = algo.train()
        assert math.isnan(result["custom_nan"])  # what train() returned still holds the NaN
        lines = read_lines(Path(algo.logdir) / "result.json")
        header, rows = read_csv(Path(algo.logdir) / "progress.csv")
    finally:
        algo.stop()
    parsed = strict_loads(lines[0])
    assert parsed["custom_nan"] is None
    assert parsed["custom_extra"] == {"inf": None, "np_nan": None, "arr": [1.0, None, None], "ok": 7}
    assert rows[0]["custom_nan"] == ""
    assert rows[0]["custom_extra/inf"] == ""
    assert rows[0]["custom_extra/ok"] == "7"
    assert "custom_extra/arr" not in header


# ---------------------------------------------------------------------------- params.json


def test_params_json_holds_the_config(results_dir):
    config = small_config(lr=3e-4, gamma=0.97)
    algo = config.build()
    try:
        algo.train()
        text = (Path(algo.logdir) / "params.json").read_text(encoding="utf-8")
    finally:
        algo.stop()
    params = strict_loads(text)
    assert isinstance(params, dict)
    assert params["lr"] == config.lr == 3e-4
    assert params["gamma"] == config.gamma == 0.97
    assert params["train_batch_size"] == config.train_batch_size
    assert params["env"] == config.env == "CartPole-v1"


def test_params_json_stays_valid_with_callables_in_the_config(results_dir):
    config = small_config().environment(env=make_cartpole).callbacks(MarkerCallbacks)
    algo = config.build()
    try:
        algo.train()
        logdir = Path(algo.logdir)
        text = (logdir / "params.json").read_text(encoding="utf-8")
    finally:
        algo.stop()
    params = strict_loads(text)
    assert params["env"] == f"{make_cartpole.__module__}:{make_cartpole.__qualname__}"
    assert params["callbacks_class"] == f"{MarkerCallbacks.__module__}:{MarkerCallbacks.__qualname__}"
    # A non-string env gives the trial dir a generic env part.
    assert logdir.parent == results_dir
    assert logdir.name.startswith("PPO_env_")


# ---------------------------------------------------------------------------- progress.csv


CSV_KEYS = ("training_iteration", "env_runners/episode_return_mean", "num_env_steps_sampled_lifetime",
            "learners/default_policy/total_loss")


def test_progress_csv_has_flat_columns_and_a_row_per_result(results_dir):
    algo = small_config().build()
    try:
        results = train_n(algo, 3)
        logdir = algo.logdir
    finally:
        algo.stop()
    header, rows = read_csv(Path(logdir) / "progress.csv")
    for key in CSV_KEYS:
        assert key in header, key
    assert not [h for h in header if "hist_stats" in h], header
    assert len(header) == len(set(header))
    assert len(rows) == 3
    for row, result in zip(rows, results):
        for key in CSV_KEYS:
            assert cell_matches(row[key], get(result, key)), (key, row[key], get(result, key))


def test_progress_csv_widens_when_evaluation_results_appear(results_dir):
    config = small_config().evaluation(evaluation_interval=2, evaluation_duration=1)
    algo = config.build()
    try:
        results = train_n(algo, 3)
        logdir = algo.logdir
    finally:
        algo.stop()
    assert "evaluation" not in results[0] and "evaluation" in results[1]
    key = "evaluation/env_runners/episode_return_mean"
    header, rows = read_csv(Path(logdir) / "progress.csv")
    assert key in header
    assert "training_iteration" in header
    assert len(rows) == 3
    assert rows[0][key] == ""
    assert rows[1][key] != ""
    assert cell_matches(rows[1][key], get(results[1], key))
    for row, result in zip(rows, results):
        assert int(row["training_iteration"]) == result["training_iteration"]
        assert cell_matches(row["num_env_steps_sampled_lifetime"], result["num_env_steps_sampled_lifetime"])
        assert cell_matches(row["env_runners/episode_return_mean"], get(result, "env_runners/episode_return_mean"))
        if "evaluation" in result:
            assert cell_matches(row[key], get(result, key))
        else:
            assert row[key] == ""


# ---------------------------------------------------------------------------- TensorBoard


def read_events(logdir: str | Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
    ea.Reload()
    return ea


def tune_tags(result: dict) -> tuple[set[str], set[str]]:
    """(scalar tags, histogram tags) Ray Tune's TBXLoggerCallback writes for `result`: every
    flat key under "ray/tune/" but config, pid, timestamp, time_total_s, training_iteration;
    numbers (bools too) unless NaN as scalars, non-empty lists as histograms."""
    scalars, histograms = set(), set()
    for key, value in flatten_result(result).items():
        if key in ("config", "pid", "timestamp", "time_total_s", "training_iteration"):
            continue
        if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
            scalars.add(f"ray/tune/{key}")
        elif isinstance(value, list) and value:
            histograms.add(f"ray/tune/{key}")
    return scalars, histograms


def test_tensorboard_scalars_and_histograms(results_dir):
    algo = small_config().build()
    try:
        results = train_n(algo, 3)
        logdir = algo.logdir
    finally:
        algo.stop()
    ea = read_events(logdir)
    tags = ea.Tags()
    env_steps = [r["num_env_steps_sampled_lifetime"] for r in results]
    assert env_steps == [BATCH, 2 * BATCH, 3 * BATCH]
    for key in ("env_runners/episode_return_mean", "num_env_steps_sampled_lifetime",
                "learners/default_policy/total_loss"):
        tag = tensorboard_tag(key)
        assert tag in tags["scalars"], tags["scalars"]
        events = ea.Scalars(tag)
        assert [e.step for e in events] == env_steps
        for e, result in zip(events, results):
            assert e.value == pytest.approx(float(get(result, key)), rel=1e-6, abs=1e-6)
    assert "run/training_iteration" not in tags["scalars"]
    key = "env_runners/hist_stats/episode_reward"
    assert key in tags["histograms"], tags["histograms"]
    assert [e.step for e in ea.Histograms(key)] == env_steps
    # The old top-level hist_stats/ holds the same lists: drawn once, under the new-stack key.
    assert "hist_stats/episode_reward" not in tags["histograms"]
    assert key not in tags["scalars"]


def test_tensorboard_steps_are_each_iterations_env_steps(results_dir):
    """Every event of every tag sits at its iteration's env-step count (the x-axis Ray Tune
    uses), never at the iteration number."""
    algo = small_config(train_batch_size=200, minibatch_size=100).build()
    try:
        results = train_n(algo, 2)
        logdir = algo.logdir
    finally:
        algo.stop()
    env_steps = [r["num_env_steps_sampled_lifetime"] for r in results]
    assert env_steps == [r["timesteps_total"] for r in results] == [200, 400]
    ea = read_events(logdir)
    tags = ea.Tags()
    assert tags["scalars"] and tags["histograms"]
    for tag in tags["scalars"]:
        assert {e.step for e in ea.Scalars(tag)} <= set(env_steps), tag
    for tag in tags["histograms"]:
        assert [e.step for e in ea.Histograms(tag)] == env_steps, tag
    assert [e.step for e in ea.Scalars("run/time_this_iter_s")] == env_steps


def test_tensorboard_legacy_keys_write_ray_tunes_layout(results_dir):
    """With logger_config={"tensorboard_legacy_keys": True}, the tags of a plain run are exactly
    those Ray Tune's TBXLoggerCallback writes for the same results (tests/tune/test_tune.py
    compares with a real Tune trial)."""
    algo = small_config().debugging(logger_config={"tensorboard_legacy_keys": True}).build()
    try:
        results = train_n(algo, 2)
        logdir = algo.logdir
    finally:
        algo.stop()
    expected_scalars, expected_histograms = set(), set()
    for result in results:
        scalars, histograms = tune_tags(result)
        expected_scalars |= scalars
        expected_histograms |= histograms
    assert "ray/tune/done" in expected_scalars and "ray/tune/env_runners/episode_return_mean" in expected_scalars
    tags = read_events(logdir).Tags()
    assert set(tags["scalars"]) == expected_scalars
    assert set(tags["histograms"]) == expected_histograms


# ---------------------------------------------------------------------------- logger_config


def test_logger_config_logdir_places_the_files(results_dir, tmp_path):
    target = tmp_path / "my_logs"
    algo = small_config().debugging(logger_config={"logdir": str(target)}).build()
    try:
        algo.train()
        assert Path(algo.logdir).resolve() == target.resolve()
    finally:
        algo.stop()
    names = os.listdir(target)
    assert {"params.json", "result.json", "progress.csv"} <= set(names)
    assert [n for n in names if n.startswith("events.out.tfevents.")]
    assert trial_dirs(results_dir) == []


def test_logger_config_json_logger_type(results_dir):
    algo = small_config().debugging(logger_config={"type": "rlx.loggers.JsonLogger"}).build()
    try:
        result = algo.train()
        assert isinstance(algo.result_logger, JsonLogger)
    finally:
        algo.stop()
    dirs = trial_dirs(results_dir)
    assert len(dirs) == 1 and TRIAL_RE.match(dirs[0].name)
    names = os.listdir(dirs[0])
    assert "result.json" in names and "params.json" in names
    assert "progress.csv" not in names
    assert not [n for n in names if n.startswith("events.out")]
    (line,) = read_lines(dirs[0] / "result.json")
    assert strict_loads(line)["training_iteration"] == result["training_iteration"]


def test_logger_config_tune_noop_logger_writes_nothing_but_save_works(results_dir):
    algo = small_config().debugging(logger_config={"type": "ray.tune.logger.NoopLogger"}).build()
    try:
        algo.train()
        algo.train()
        assert isinstance(algo.result_logger, NoopLogger)
        assert trial_dirs(results_dir) == []
        saved = algo.save()
        logdir = algo.logdir
    finally:
        algo.stop()
    ckpt = Path(saved.checkpoint.path)
    assert ckpt.is_dir() and any(ckpt.iterdir())
    assert ckpt.parent.parent.resolve() == results_dir.resolve()
    assert TRIAL_RE.match(ckpt.parent.name), ckpt.parent.name
    assert Path(logdir).resolve() == ckpt.parent.resolve()
    # Only the checkpoint: no result files.
    assert sorted(os.listdir(ckpt.parent)) == [ckpt.name]


@pytest.mark.parametrize("spec", [CSVLogger, "rlx.loggers.csv_logger:CSVLogger", "ray.tune.logger:CSVLogger"])
def test_logger_config_type_as_class_or_path(results_dir, spec):
    algo = small_config().debugging(logger_config={"type": spec}).build()
    try:
        results = train_n(algo, 2)
        assert type(algo.result_logger) is CSVLogger
    finally:
        algo.stop()
    (trial,) = trial_dirs(results_dir)
    assert sorted(os.listdir(trial)) == ["progress.csv"]
    _, rows = read_csv(trial / "progress.csv")
    assert [int(r["training_iteration"]) for r in rows] == [r["training_iteration"] for r in results]


def test_logger_config_bad_type_raises_config_error_naming_it(results_dir):
    bad = "no_such_pkg.loggers.MissingLogger"
    with pytest.raises(ConfigError, match=re.escape(bad)):
        algo = small_config().debugging(logger_config={"type": bad}).build()
        try:
            algo.train()
        finally:
            algo.stop()


class TuneStyleLogger:
    """A logger written for Tune: not an rlx Logger, constructor `(config, logdir)` only."""

    instances: list["TuneStyleLogger"] = []

    def __init__(self, config, logdir):
        self.config, self.logdir, self.results = config, str(logdir), []
        TuneStyleLogger.instances.append(self)

    def on_result(self, result):
        self.results.append(result)

    def flush(self):
        pass

    def close(self):
        pass


def test_logger_config_type_tune_style_class(results_dir):
    TuneStyleLogger.instances.clear()
    algo = small_config().debugging(logger_config={"type": TuneStyleLogger}).build()
    try:
        results = train_n(algo, 2)
        (lg,) = TuneStyleLogger.instances
        assert algo.result_logger is lg
        assert algo.logdir == lg.logdir
        assert TRIAL_RE.match(Path(lg.logdir).name)
    finally:
        algo.stop()
    assert [canonical(r) for r in lg.results] == [canonical(r) for r in results]


def test_logger_config_type_that_is_not_a_class(results_dir):
    with pytest.raises(ConfigError, match="pretty_print"):
        resolve_logger_class("rlx.loggers.pretty:pretty_print")
    with pytest.raises(ConfigError):
        resolve_logger_class(42)


def test_logger_config_options_reach_the_loggers(results_dir, tmp_path):
    # tensorboard_flush_secs is a TBXLogger option, passed through logger_config.
    algo = small_config().debugging(logger_config={"logdir": str(tmp_path / "x"),
                                                   "tensorboard_flush_secs": 1000}).build()
    try:
        algo.train()
        tbx = [lg for lg in algo.result_logger._loggers if isinstance(lg, TBXLogger)]
        assert len(tbx) == 1
        assert tbx[0].logger_config == {"tensorboard_flush_secs": 1000}
    finally:
        algo.stop()


# ---------------------------------------------------------------------------- logger_creator


def _build_with_creator(how: str, creator):
    if how == "build_algo":
        return small_config().build_algo(logger_creator=creator)
    if how == "constructor":
        return PPO(config=small_config(), logger_creator=creator)
    if how == "debugging":
        return small_config().debugging(logger_creator=creator).build()
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["build_algo", "constructor", "debugging"])
def test_logger_creator_gets_every_result(results_dir, tmp_path, how):
    made: list[RecordingLogger] = []
    configs = []

    def creator(config):
        configs.append(config)
        lg = RecordingLogger(config, tmp_path / f"custom_{how}")
        made.append(lg)
        return lg

    algo = _build_with_creator(how, creator)
    try:
        results = train_n(algo, 3)
        assert len(made) == 1
        recorder = made[0]
        assert algo.result_logger is recorder
        assert algo.logdir == recorder.logdir == str(tmp_path / f"custom_{how}")
        assert len(recorder.results) == 3
        assert [canonical(r) for r in recorder.results] == [canonical(r) for r in results]
        assert configs[0] is algo.config
    finally:
        algo.stop()
    assert recorder.closed == 1
    assert trial_dirs(results_dir) == []


@pytest.mark.parametrize("how", ["build_algo", "constructor", "debugging"])
def test_logger_creator_returning_none_is_a_config_error(results_dir, how):
    algo = _build_with_creator(how, lambda config: None)
    try:
        with pytest.raises(ConfigError, match="logger_creator"):
            algo.train()
    finally:
        algo.stop()


def test_checkpoint_with_lambda_logger_creator_restores_into_a_new_trial_dir(results_dir, tmp_path):
    old_dir = tmp_path / "old_run"
    config = small_config().debugging(logger_creator=lambda cfg: UnifiedLogger(cfg, old_dir))
    algo = config.build()
    try:
        first = algo.train()
        assert Path(algo.logdir) == old_dir
        saved = algo.save()
        # params.json of the old run is valid JSON despite the lambda.
        params = strict_loads((old_dir / "params.json").read_text(encoding="utf-8"))
        assert isinstance(params["logger_creator"], str)
    finally:
        algo.stop()
    assert Path(saved.checkpoint.path).parent == old_dir

    restored = Algorithm.from_checkpoint(saved.checkpoint.path)
    try:
        second = restored.train()
        new_dir = Path(restored.logdir)
    finally:
        restored.stop()
    assert new_dir.resolve() != old_dir.resolve()
    assert new_dir.parent.resolve() == results_dir.resolve()
    assert TRIAL_RE.match(new_dir.name), new_dir.name
    new_lines = read_lines(new_dir / "result.json")
    assert [strict_loads(ln)["training_iteration"] for ln in new_lines] == [second["training_iteration"]]
    old_lines = read_lines(old_dir / "result.json")
    assert [strict_loads(ln)["training_iteration"] for ln in old_lines] == [first["training_iteration"]]


# ---------------------------------------------------------------------------- json_safe


def test_json_safe_numpy_values():
    out = json_safe({"f": np.float32(1.5), "d": np.float64(2.5), "i": np.int64(3), "b": np.bool_(True),
                     "a": np.arange(3, dtype=np.int32), "m": np.ones((2, 2), dtype=np.float64)})
    assert out == {"f": 1.5, "d": 2.5, "i": 3, "b": True, "a": [0, 1, 2], "m": [[1.0, 1.0], [1.0, 1.0]]}
    assert type(out["f"]) is float and type(out["i"]) is int and type(out["b"]) is bool
    # np.float64 subclasses float, but is a numpy type all the same: it must come back as a
    # plain float (yaml.safe_dump, used by pretty_print, rejects np.float64).
    assert type(out["d"]) is float, type(out["d"])
    assert all(type(x) is int for x in out["a"])
    json.dumps(out, allow_nan=False)


def test_json_safe_non_finite_become_none():
    out = json_safe({"nan": float("nan"), "inf": float("inf"), "ninf": -math.inf,
                     "np": np.float64("nan"), "arr": np.array([np.nan, 2.0, np.inf]),
                     "list": [1.0, float("nan")], "fine": 0.25})
    assert out == {"nan": None, "inf": None, "ninf": None, "np": None, "arr": [None, 2.0, None],
                   "list": [1.0, None], "fine": 0.25}
    json.dumps(out, allow_nan=False)


def test_json_safe_containers_classes_and_objects():
    class Opaque:
        def __repr__(self):
            return "<opaque>"

    out = json_safe({"t": (1, (2, 3)), "s": {4}, 5: "int key", "cls": MarkerCallbacks,
                     "fn": make_cartpole, "obj": Opaque(), "none": None, "str": "x", "bool": False})
    assert out["t"] == [1, [2, 3]]
    assert out["s"] == [4]
    assert out["5"] == "int key"
    assert out["cls"] == f"{MarkerCallbacks.__module__}:{MarkerCallbacks.__qualname__}"
    assert out["fn"] == f"{make_cartpole.__module__}:{make_cartpole.__qualname__}"
    assert out["obj"] == "<opaque>"
    assert out["none"] is None and out["str"] == "x" and out["bool"] is False
    json.dumps(out, allow_nan=False)


def test_json_safe_torch_tensor():
    torch = pytest.importorskip("torch")
    assert json_safe(torch.tensor([1.0, float("nan")])) == [1.0, None]
    assert json_safe(torch.tensor(2)) == 2


# ---------------------------------------------------------------------------- flatten_result


def test_flatten_result_joins_nested_keys():
    result = {"a": 1, "b": {"c": 2.0, "d": {"e": [1, 2]}, "empty": {}}, "f": None}
    assert flatten_result(result) == {"a": 1, "b/c": 2.0, "b/d/e": [1, 2], "f": None}
    assert flatten_result(result, delimiter=".") == {"a": 1, "b.c": 2.0, "b.d.e": [1, 2], "f": None}
    assert flatten_result({}) == {}
    # The input is not modified.
    assert result["b"]["d"] == {"e": [1, 2]}


# ---------------------------------------------------------------------------- CSVLogger


def test_csv_logger_widens_for_keys_that_appear_later(tmp_path):
    lg = CSVLogger({}, tmp_path)
    lg.on_result({"training_iteration": 1, "x": {"y": 1.5}, "hist": [1, 2]})
    lg.on_result({"training_iteration": 2, "x": {"y": 2.5}})
    lg.on_result({"training_iteration": 3, "x": {"y": 3.5, "z": "new"}, "w": np.float32(0.5)})
    lg.close()
    header, rows = read_csv(tmp_path / "progress.csv")
    assert header[:2] == ["training_iteration", "x/y"]
    assert set(header) == {"training_iteration", "x/y", "x/z", "w"}
    assert [r["training_iteration"] for r in rows] == ["1", "2", "3"]
    assert [float(r["x/y"]) for r in rows] == [1.5, 2.5, 3.5]
    assert [r["x/z"] for r in rows] == ["", "", "new"]
    assert [r["w"] for r in rows] == ["", "", "0.5"]
    assert not (tmp_path / "progress.csv.tmp").exists()


def test_csv_logger_reopened_appends_under_the_same_header(tmp_path):
    first = CSVLogger({}, tmp_path)
    first.on_result({"training_iteration": 1, "a": 1.0, "b": 2})
    first.on_result({"training_iteration": 2, "a": 1.5, "b": 3})
    first.close()
    header_before, _ = read_csv(tmp_path / "progress.csv")

    second = CSVLogger({}, tmp_path)
    second.on_result({"training_iteration": 3, "b": 4, "a": 2.0})  # other key order
    second.on_result({"training_iteration": 4, "a": 2.5})  # a key missing
    second.close()
    text = (tmp_path / "progress.csv").read_text(encoding="utf-8")
    assert text.count("training_iteration") == 1  # one header only
    header, rows = read_csv(tmp_path / "progress.csv")
    assert header == header_before
    assert [r["training_iteration"] for r in rows] == ["1", "2", "3", "4"]
    assert [r["a"] for r in rows] == ["1.0", "1.5", "2.0", "2.5"]
    assert [r["b"] for r in rows] == ["2", "3", "4", ""]


def test_csv_logger_reopened_then_widened_keeps_old_rows(tmp_path):
    first = CSVLogger({}, tmp_path)
    first.on_result({"training_iteration": 1, "a": 1.0})
    first.close()
    second = CSVLogger({}, tmp_path)
    second.on_result({"training_iteration": 2, "a": 2.0, "new": 7})
    second.close()
    header, rows = read_csv(tmp_path / "progress.csv")
    assert header == ["training_iteration", "a", "new"]
    assert rows == [{"training_iteration": "1", "a": "1.0", "new": ""},
                    {"training_iteration": "2", "a": "2.0", "new": "7"}]


def test_csv_logger_flushes_each_row(tmp_path):
    lg = CSVLogger({}, tmp_path)
    try:
        lg.on_result({"training_iteration": 1, "v": 1})
        _, rows = read_csv(tmp_path / "progress.csv")
        assert len(rows) == 1
        lg.on_result({"training_iteration": 2, "v": 2})
        _, rows = read_csv(tmp_path / "progress.csv")
        assert len(rows) == 2
    finally:
        lg.close()
    lg.close()  # closing twice is harmless


# ---------------------------------------------------------------------------- other loggers


def test_json_logger_on_hand_made_results(tmp_path):
    lg = JsonLogger({"lr": np.float32(0.5), "fn": make_cartpole}, tmp_path)
    lg.on_result({"training_iteration": 1, "v": np.float64("nan"), "arr": np.arange(2)})
    lines = read_lines(tmp_path / "result.json")  # flushed before close
    assert [strict_loads(ln) for ln in lines] == [{"training_iteration": 1, "v": None, "arr": [0, 1]}]
    lg.update_config({"lr": 0.25})
    lg.close()
    assert strict_loads((tmp_path / "params.json").read_text(encoding="utf-8")) == {"lr": 0.25}


def test_unified_logger_fans_out_and_closes(tmp_path):
    lg = UnifiedLogger({"a": 1}, tmp_path / "u", loggers=[JsonLogger, CSVLogger])
    lg.on_result({"training_iteration": 1, "x": 1.0})
    lg.flush()
    lg.close()
    assert sorted(os.listdir(tmp_path / "u")) == ["params.json", "progress.csv", "result.json"]


def test_tbx_logger_on_hand_made_results(tmp_path):
    lg = TBXLogger({}, tmp_path)
    lg.on_result({"training_iteration": 4, "a": {"b": np.float32(1.25)}, "i": 3, "s": "text", "flag": True,
                  "nan": float("nan"), "inf": float("inf"), "none": None, "h": [1.0, 2.0, 3.0], "empty": [],
                  "pid": 7, "timestamp": 1, "time_total_s": 2.0})
    lg.close()
    ea = read_events(tmp_path)
    tags = ea.Tags()
    assert set(tags["scalars"]) == {"a/b", "run/i", "run/flag", "run/inf"}
    # No env steps in the result: the step is the training iteration, as in Tune.
    assert [(e.step, e.value) for e in ea.Scalars("a/b")] == [(4, 1.25)]
    assert [(e.step, e.value) for e in ea.Scalars("run/i")] == [(4, 3.0)]
    assert [(e.step, e.value) for e in ea.Scalars("run/flag")] == [(4, 1.0)]
    assert tags["histograms"] == ["run/h"]


def test_tbx_logger_steps_by_env_steps(tmp_path):
    lg = TBXLogger({}, tmp_path)
    lg.on_result({"training_iteration": 1, "timesteps_total": 300, "x": 1.0})
    lg.on_result({"training_iteration": 2, "num_env_steps_sampled_lifetime": 700, "x": 2.0})
    lg.on_result({"training_iteration": 3, "timesteps_total": 0, "x": 3.0})  # Tune: 0 steps -> the iteration
    lg.close()
    assert [(e.step, e.value) for e in read_events(tmp_path).Scalars("run/x")] == [(300, 1.0), (700, 2.0),
                                                                                  (3, 3.0)]


def test_tbx_logger_accepts_a_zero_dim_array(tmp_path):
    # A 0-d array is a scalar to the other loggers (CSVLogger writes it as a cell); it must
    # not crash TBXLogger (which would make train() raise after the result was built).
    lg = TBXLogger({}, tmp_path)
    try:
        lg.on_result({"training_iteration": 1, "z": np.array(2.5)})
    finally:
        lg.close()
    assert [(e.step, e.value) for e in read_events(tmp_path).Scalars("run/z")] == [(1, 2.5)]


def test_noop_logger_creates_no_directory(tmp_path):
    lg = NoopLogger({}, tmp_path / "never")
    lg.on_result({"training_iteration": 1})
    lg.flush()
    lg.close()
    assert not (tmp_path / "never").exists()
    assert NoopLogger().logdir is None


def test_base_logger_requires_on_result(tmp_path):
    with pytest.raises(TypeError, match="on_result"):
        Logger({}, tmp_path).on_result({})


def test_trial_dir_name_and_results_root(monkeypatch, results_dir):
    assert results_root() == results_dir
    monkeypatch.delenv("RLX_RESULTS_DIR")
    assert results_root() == Path("~/rlx_results").expanduser()
    name = trial_dir_name("PPO", "ALE/Pong-v5")
    assert re.match(r"^PPO_ALE_Pong-v5_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_[0-9a-f]{6}$", name), name
    assert trial_dir_name("PPO", make_cartpole).startswith("PPO_env_")
    assert trial_dir_name("PPO", "CartPole-v1") != trial_dir_name("PPO", "CartPole-v1")


# ---------------------------------------------------------------------------- pretty_print


def test_pretty_print_is_yaml_without_hist_stats():
    result = {
        "training_iteration": 2,
        "env_runners": {"episode_return_mean": np.float32(12.5), "hist_stats": {"episode_reward": [1.0, 2.0]},
                        "nan": float("nan")},
        "hist_stats": {"episode_reward": [3.0]},
        "config": {"lr": 1e-3},
        "learners": {"default_policy": {"total_loss": np.float64(0.75), "tup": (1, 2)}},
        "drop_me": 1,
    }
    text = pretty_print(result, exclude={"drop_me"})
    assert "hist_stats" not in text
    loaded = yaml.safe_load(text)
    assert loaded == {
        "training_iteration": 2,
        "env_runners": {"episode_return_mean": 12.5, "nan": None},
        "learners": {"default_policy": {"total_loss": 0.75, "tup": [1, 2]}},
    }
    # Keys keep their order (not sorted).
    assert list(loaded) == ["training_iteration", "env_runners", "learners"]


def test_pretty_print_of_a_real_result(results_dir):
    algo = small_config().build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    text = pretty_print(result)
    assert "hist_stats" not in text
    loaded = yaml.safe_load(text)
    assert loaded["training_iteration"] == result["training_iteration"]
    assert same_number(loaded["env_runners"]["episode_return_mean"], result["env_runners"]["episode_return_mean"])
