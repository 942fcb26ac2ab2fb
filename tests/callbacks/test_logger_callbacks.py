"""Weights & Biases and MLflow without Ray Tune: `logger_config={"wandb": ...}` /
`{"mlflow": ...}`, WandbLoggerCallback / MLflowLoggerCallback in `config.callbacks()`, and
`rlx train --wandb-project / --mlflow-uri`. W&B runs offline (files under tmp_path), MLflow
against a local file store; the logged metrics are read back with each package's own reader.
"""
from __future__ import annotations

import functools
import json
import sys
import time

import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.callbacks import MLflowLoggerCallback, WandbLoggerCallback
from rlx.cli.main import main as rlx_main
from rlx.loggers import MLflowLogger, WandbLogger
from rlx.utils.errors import ConfigError, install_hint

RETURN = "env_runners/episode_return_mean"


def ppo_config(tmp_path, **logger_config):
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=256, minibatch_size=64, num_epochs=1, lr=0.0007)
        .debugging(seed=0, logger_config={"logdir": str(tmp_path / "trial"), **logger_config})
    )


def train(config, iterations=2):
    algo = config.build_algo()
    try:
        return [algo.train() for _ in range(iterations)]
    finally:
        algo.stop()


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_home"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb_cache"))


def wandb_offline_run(root):
    """(history, config) of the one offline W&B run under `root`, read from its .wandb file:
    the logged steps as dicts, and the run's config."""
    files = sorted(root.rglob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    # run.finish() returns once wandb's service has the run's last record, which it writes to
    # the file a moment later.
    deadline = time.monotonic() + 30
    while not any(r.WhichOneof("record_type") == "exit" for r in wandb_records(files[0])):
        assert time.monotonic() < deadline, "the offline run's file never got its exit record"
        time.sleep(0.05)
    history, config = [], {}
    for record in wandb_records(files[0]):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item})
        elif kind == "run":
            config.update({u.key: json.loads(u.value_json) for u in record.run.config.update})
    return history, config


def wandb_records(path):
    """The records (wandb's protobuf Record) of a .wandb file: wandb's log format, a 7-byte
    header, then 32 KiB blocks of records (crc32, length, type; FULL/FIRST/MIDDLE/LAST parts)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, parts = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a record header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        parts += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, or the LAST part of a record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            parts = b""
            yield record


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    """The URI of a local MLflow file store (MLflow 3 wants MLFLOW_ALLOW_FILE_STORE for one)."""
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


def mlflow_runs(uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiments = client.search_experiments()
    return client, [r for e in experiments for r in client.search_runs([e.experiment_id])]


# ------------------------------------------------------------------ W&B


def test_wandb_logger_config_logs_each_result_offline(tmp_path, wandb_offline):
    config = ppo_config(tmp_path, wandb={"project": "rlx-test", "dir": str(tmp_path / "wb")})
    results = train(config)
    history, logged_config = wandb_offline_run(tmp_path / "wb")
    assert [step["_step"] for step in history] == [0, 1]  # one W&B step per result
    for step, result in zip(history, results):
        assert step[RETURN] == pytest.approx(result["env_runners"]["episode_return_mean"])
        assert step["learners/default_policy/total_loss"] == pytest.approx(
            result["learners"]["default_policy"]["total_loss"])
        assert step["training_iteration"] == result["training_iteration"]
        assert "episode_reward_mean" not in step  # each value once, under its new-stack key
    assert logged_config["lr"] == 0.0007
    # The default loggers still write their files.
    assert (tmp_path / "trial" / "result.json").is_file()


def test_wandb_logger_callback_in_plain_training(tmp_path, wandb_offline):
    callback = functools.partial(WandbLoggerCallback, project="rlx-test", mode="offline", dir=str(tmp_path / "wb"))
    results = train(ppo_config(tmp_path).callbacks(callback))
    history, _ = wandb_offline_run(tmp_path / "wb")
    # Two results, two W&B steps (the callback's logger is not also fed by the callback itself).
    assert [step[RETURN] for step in history] == pytest.approx(
        [r["env_runners"]["episode_return_mean"] for r in results])


@pytest.mark.parametrize("logger_class, module", [(WandbLogger, "wandb"), (MLflowLogger, "mlflow")])
def test_missing_package_says_what_to_install(tmp_path, monkeypatch, logger_class, module):
    monkeypatch.setitem(sys.modules, module, None)  # `import <module>` raises ImportError
    with pytest.raises(ImportError) as err:
        logger_class({}, tmp_path, logger_config={module: {}})
    assert str(err.value) == (f"{logger_class.__name__} needs the {module} package, which is not installed: "
                              f"{install_hint(module)}")


# ------------------------------------------------------------------ MLflow


def test_mlflow_logger_config_logs_each_result_to_a_file_store(tmp_path, mlflow_store):
    uri = mlflow_store
    results = train(ppo_config(tmp_path, mlflow={"tracking_uri": uri, "experiment_name": "rlx-test"}))
    client, runs = mlflow_runs(uri)
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "trial"
    history = client.get_metric_history(run.info.run_id, RETURN)
    assert [(m.step, m.value) for m in history] == [
        (r["training_iteration"], pytest.approx(r["env_runners"]["episode_return_mean"])) for r in results]
    assert "episode_reward_mean" not in run.data.metrics
    assert run.data.params["lr"] == "0.0007"


def test_mlflow_logger_callback_in_plain_training(tmp_path, mlflow_store):
    uri = mlflow_store
    callback = functools.partial(MLflowLoggerCallback, tracking_uri=uri, run_name="cb-run")
    results = train(ppo_config(tmp_path).callbacks(callback))
    client, runs = mlflow_runs(uri)
    assert [r.info.run_name for r in runs] == ["cb-run"]
    assert runs[0].info.status == "FINISHED"  # ended by algo.stop()
    history = client.get_metric_history(runs[0].info.run_id, "num_env_steps_sampled_lifetime")
    assert [m.value for m in history] == [r["num_env_steps_sampled_lifetime"] for r in results]


def test_mlflow_unknown_setting_is_a_config_error(tmp_path):
    pytest.importorskip("mlflow")
    with pytest.raises(ConfigError, match="unknown setting.*'trackng_uri'"):
        MLflowLogger({}, tmp_path, logger_config={"mlflow": {"trackng_uri": "file:///x"}})


# ------------------------------------------------------------------ rlx train


def test_rlx_train_logs_to_mlflow_and_wandb(tmp_path, wandb_offline, mlflow_store, monkeypatch, capsys):
    monkeypatch.setenv("RLX_RESULTS_DIR", str(tmp_path / "results"))
    uri = mlflow_store
    status = rlx_main(["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}',
                       "--config", json.dumps({"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1}),
                       "--storage-path", str(tmp_path / "results"), "--no-checkpoint-at-end",
                       "--mlflow-uri", uri, "--wandb-project", "rlx-cli-test"])
    assert status == 0
    client, runs = mlflow_runs(uri)
    assert len(runs) == 1 and RETURN in runs[0].data.metrics
    trial_dir = next((tmp_path / "results" / "default").iterdir())
    history, logged_config = wandb_offline_run(trial_dir)  # the run's files sit in the trial directory
    assert len(history) == 1 and RETURN in history[0]
    assert logged_config["train_batch_size"] == 256
