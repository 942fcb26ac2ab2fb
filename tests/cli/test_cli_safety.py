"""Safety of `rlx train` against hostile or unlucky input: experiment names that would
leave the storage path, YAML alias bombs, and a disk that fills up during training.

The CLI runs in-process (`rlx.cli.main.main`) with tiny PPO budgets; refusals happen
before anything trains.
"""
from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from rlx.algorithms.checkpointing import reset_env_source
from rlx.cli.experiments import load_experiment_file
from rlx.cli.main import json_arg, main
from rlx.cli.safe_yaml import MAX_YAML_NODES
from rlx.loggers import CSVLogger, JsonLogger, TBXLogger, UnifiedLogger
from rlx.loggers.creation import trial_dir_name
from rlx.utils.errors import ConfigError

SMALL = json.dumps({"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1})
ONE_ITERATION = '{"training_iteration": 1}'
ENOSPC = OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture(autouse=True)
def isolated_cli(tmp_path, monkeypatch):
    """main() adds the cwd to sys.path and records --import modules: undo both."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    reset_env_source()


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `rlx ARGV...` run in this process."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line_error(status: int, err: str, *needles: str) -> str:
    """A refused command: status 1 and one line on stderr holding every needle."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 1 and len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def train_args(storage: Path, *extra: str) -> list[str]:
    return ["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL, "--stop", ONE_ITERATION,
            "--storage-path", str(storage), *extra]


def write_yaml_experiment(path: Path, name: str, extra_config: str = "") -> Path:
    path.write_text(
        f"{json.dumps(name)}:\n"
        "  run: PPO\n"
        "  env: CartPole-v1\n"
        "  stop: {training_iteration: 1}\n"
        "  config:\n"
        "    train_batch_size: 128\n"
        "    minibatch_size: 64\n"
        "    num_epochs: 1\n"
        + extra_config,
        encoding="utf-8",
    )
    return path


# ------------------------------------------------------------------ names under the storage path


@pytest.mark.parametrize("name", ["../x", "..", ".", "a/b", "a/../../x", "ABSOLUTE"])
def test_experiment_name_that_leaves_the_storage_path_is_refused(tmp_path, capsys, name):
    storage = tmp_path / "store"
    if name == "ABSOLUTE":
        name = str(tmp_path / "elsewhere")
    status, out, err = run_cli(capsys, *train_args(storage, "--experiment-name", name))
    line = assert_one_line_error(status, err, "--experiment-name", repr(name), "single directory name")
    assert "storage path" in line
    assert not (tmp_path / "x").exists() and not (tmp_path / "elsewhere").exists()
    # Nothing trained: no trial directory anywhere.
    assert not list(tmp_path.rglob("result.json"))


def test_plain_experiment_name_still_works(tmp_path, capsys):
    storage = tmp_path / "store"
    status, out, err = run_cli(capsys, *train_args(storage, "--experiment-name", "my-exp.v2", "--no-progress"))
    assert status == 0, err
    [trial] = list((storage / "my-exp.v2").iterdir())
    assert (trial / "result.json").exists()


def test_experiment_file_key_that_leaves_the_storage_path_is_refused(tmp_path, capsys):
    storage = tmp_path / "store"
    path = write_yaml_experiment(tmp_path / "exp.yaml", "../escaped")
    status, out, err = run_cli(capsys, "train", "file", str(path), "--storage-path", str(storage))
    assert_one_line_error(status, err, str(path), "experiment name", "'../escaped'")
    assert not (tmp_path / "escaped").exists()
    assert not list(tmp_path.rglob("result.json"))


def test_json_experiment_file_with_an_absolute_name_is_refused(tmp_path):
    target = tmp_path / "abs_target"
    path = tmp_path / "exp.json"
    path.write_text(json.dumps({str(target): {"run": "PPO", "env": "CartPole-v1"}}), encoding="utf-8")
    with pytest.raises(ConfigError, match="experiment name") as info:
        load_experiment_file(path)
    assert str(target) in str(info.value) and str(path) in str(info.value)


def test_sweep_with_an_escaping_name_is_refused_before_ray_starts(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    ray_was_running = ray.is_initialized()  # an earlier test of the session may have started it
    storage = tmp_path / "store"
    config = json.dumps({"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1,
                         "lr": {"grid_search": [1e-3, 1e-4]}})
    status, out, err = run_cli(capsys, "train", "--algo", "PPO", "--env", "CartPole-v1", "--config", config,
                               "--stop", ONE_ITERATION, "--storage-path", str(storage),
                               "--experiment-name", "../sweep")
    assert_one_line_error(status, err, "--experiment-name", "'../sweep'")
    assert not (tmp_path / "sweep").exists()
    assert ray.is_initialized() == ray_was_running


def test_trial_dir_name_is_one_bounded_directory_name():
    for env in ("../../etc/x", "a\\..\\b", "nul\0byte", "é" * 300, "ns:Name/v0"):
        name = trial_dir_name("PPO", env)
        assert Path(name).name == name and name not in (".", "..")
        assert not {"/", "\\", "\0", ":"} & set(name)
        assert len(name.encode()) <= 255


# ------------------------------------------------------------------ YAML alias bombs


def write_bomb(path: Path, levels: int = 9) -> Path:
    """A "billion laughs" experiment file: 9 levels of 9 aliases of the level below
    (9**9 leaves once expanded), in an env_config where the config accepts it."""
    lines = ['    l0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, levels + 1):
        lines.append(f"    l{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return write_yaml_experiment(path, "bomb", "    env_config:\n" + "\n".join(lines) + "\n")


class _Hung(Exception):
    pass


def _call_with_deadline(seconds: float, fn, *args):
    """fn(*args), failing the test (instead of hanging it) when it takes over `seconds`."""

    def on_alarm(signum, frame):
        raise _Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_alias_bomb_experiment_file_is_refused_quickly(tmp_path):
    path = write_bomb(tmp_path / "bomb.yaml")
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_experiment_file(path)
    assert time.perf_counter() - start < 1.0
    message = str(info.value)
    assert str(path) in message and f"{MAX_YAML_NODES:,}" in message and "\n" not in message


def test_rlx_train_file_refuses_an_alias_bomb_in_one_line(tmp_path, capsys):
    path = write_bomb(tmp_path / "bomb.yaml")
    start = time.perf_counter()
    status = _call_with_deadline(10, main, ["train", "file", str(path), "--storage-path", str(tmp_path / "s")])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert_one_line_error(status, err, str(path), "alias")
    assert elapsed < 3.0


def test_self_referencing_yaml_is_refused(tmp_path):
    path = write_yaml_experiment(tmp_path / "loop.yaml", "loop", "    env_config: &loop {me: *loop}\n")
    with pytest.raises(ConfigError, match="refers to"):
        _call_with_deadline(5, load_experiment_file, path)


@pytest.mark.slow
def test_deeply_nested_yaml_and_json_are_one_line_errors(tmp_path):
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_experiment_file(deep_yaml)
    deep_json = tmp_path / "deep.json"
    deep_json.write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_experiment_file(deep_json)
    with pytest.raises(argparse.ArgumentTypeError, match="--config"):
        json_arg("--config")('{"a":' * 50_000 + "1" + "}" * 50_000)


def test_ordinary_anchors_and_aliases_still_load(tmp_path):
    path = write_yaml_experiment(
        tmp_path / "anchors.yaml", "anchored",
        "    model: &m {fcnet_hiddens: [32, 32]}\n"
        "    evaluation_config: {model: *m}\n",
    )
    [spec] = load_experiment_file(path)
    assert spec.config["model"] == {"fcnet_hiddens": [32, 32]}
    assert spec.config["evaluation_config"]["model"] == {"fcnet_hiddens": [32, 32]}


# ------------------------------------------------------------------ a full disk


def rlx_warnings(caplog) -> list[str]:
    """The loggers' warnings about failed writes."""
    return [r.getMessage() for r in caplog.records
            if r.name == "rlx" and r.levelno == logging.WARNING and "Stopped writing" in r.getMessage()]


def assert_one_disk_warning(caplog, logdir: Path, what: str) -> None:
    warnings = rlx_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert str(logdir) in warnings[0] and what in warnings[0] and "No space left on device" in warnings[0]
    assert not any(r.exc_info for r in caplog.records)


def _full_disk_file(path, mode="wb"):
    """What opening an event file gives on a full disk: writes fail once flushed."""
    return open("/dev/full", mode)


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("failure", ["open", "write", "flush", "dev_full"])
def test_tbx_logger_on_a_full_disk_warns_once_and_keeps_going(tmp_path, monkeypatch, caplog, failure):
    import tensorboardX.record_writer as record_writer

    if failure == "dev_full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    patches = {"open": (record_writer, "open_file", _no_space),
               "write": (record_writer.RecordWriter, "write", _no_space),
               "flush": (record_writer.RecordWriter, "flush", _no_space),
               "dev_full": (record_writer, "open_file", _full_disk_file)}
    monkeypatch.setattr(*patches[failure])
    caplog.set_level(logging.WARNING, logger="rlx")
    lg = TBXLogger({}, tmp_path)
    for i in range(1, 6):  # fewer results than tensorboardX's queue holds: no hang either way
        lg.on_result({"training_iteration": i, "x": float(i), "h": [1.0, 2.0] * 2000})
    lg.flush()
    lg.close()
    assert_one_disk_warning(caplog, tmp_path, "TensorBoard")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_json_and_csv_loggers_on_a_full_disk_warn_once_and_keep_going(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="rlx")
    json_dir, csv_dir = tmp_path / "json", tmp_path / "csv"
    json_dir.mkdir()
    csv_dir.mkdir()
    (json_dir / "result.json").symlink_to("/dev/full")
    (csv_dir / "progress.csv.tmp").symlink_to("/dev/full")
    jl, cl = JsonLogger({"lr": 0.1}, json_dir), CSVLogger({}, csv_dir)
    for i in range(1, 4):
        jl.on_result({"training_iteration": i})
        cl.on_result({"training_iteration": i, "new_key_%d" % i: 1.0})
    for lg in (jl, cl):
        lg.flush()
        lg.close()
    warnings = rlx_warnings(caplog)
    assert len(warnings) == 2, warnings
    assert str(json_dir) in warnings[0] and "result.json" in warnings[0]
    assert str(csv_dir) in warnings[1] and "progress.csv" in warnings[1]
    assert all("No space left on device" in w for w in warnings)
    assert not (csv_dir / "progress.csv.tmp").exists()


def test_training_goes_on_when_tensorboard_cannot_write(tmp_path, monkeypatch, capsys, caplog):
    import tensorboardX.record_writer as record_writer

    monkeypatch.setattr(record_writer.RecordWriter, "write", _no_space)
    caplog.set_level(logging.WARNING, logger="rlx")
    storage = tmp_path / "store"
    status, out, err = run_cli(capsys, "train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL,
                               "--stop", '{"training_iteration": 3}', "--storage-path", str(storage),
                               "--no-progress")
    assert status == 0, err
    [trial] = list((storage / "default").iterdir())
    lines = (trial / "result.json").read_text().splitlines()
    assert [json.loads(ln)["training_iteration"] for ln in lines] == [1, 2, 3]
    assert_one_disk_warning(caplog, trial, "TensorBoard")
    assert "Traceback" not in err


def test_unified_logger_on_a_full_disk_warns_once_per_file(tmp_path, monkeypatch, caplog):
    import tensorboardX.proto.event_pb2  # noqa: F401 - imported before open() starts failing
    import tensorboardX.proto.summary_pb2  # noqa: F401

    monkeypatch.setattr("builtins.open", _no_space)
    caplog.set_level(logging.WARNING, logger="rlx")
    lg = UnifiedLogger({"a": 1}, tmp_path / "u")
    for i in range(1, 4):
        lg.on_result({"training_iteration": i, "x": 1.0})
    lg.update_config({"a": 2})
    lg.flush()
    lg.close()
    warnings = rlx_warnings(caplog)
    assert len(warnings) == 3, warnings
    assert {w.split(" to ")[0] for w in warnings} == {"Stopped writing params.json", "Stopped writing progress.csv",
                                                     "Stopped writing TensorBoard events"}
