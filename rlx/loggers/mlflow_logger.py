"""MLflowLogger: each training result's numbers to an MLflow run, without Ray Tune.

    config.debugging(logger_config={"mlflow": {"tracking_uri": "file:///tmp/mlruns"}})

adds it to the default loggers (result.json, progress.csv, TensorBoard); `rlx train
--mlflow-uri URI` does the same. mlflow is imported when the logger starts, so it is needed
only by runs that use it (the `mlflow` extra: mlflow-skinny; or `pip install mlflow` for its UI).
"""
from __future__ import annotations

import os
import re
import time
from typing import Any

from rlx.loggers.logger import Logger, flatten_result
from rlx.loggers.tracking import import_tracking_package, legacy_keys, scalar_metrics, tracking_settings
from rlx.loggers.wandb_logger import config_dict
from rlx.utils.errors import ConfigError, install_hint

#: The `logger_config` key holding the settings.
SECTION = "mlflow"
#: The settings MLflowLogger reads.
SETTINGS = ("tracking_uri", "registry_uri", "experiment_name", "run_name", "tags", "log_params", "excludes")
#: MLflow's limits: entries per log_batch request, characters of a param value.
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000
_MAX_PARAM_CHARS = 6000
_MAX_KEY_CHARS = 250
#: Characters MLflow refuses in a metric or param name.
_BAD_KEY_CHARS = re.compile(r"[^\w\-. :/]")


class MLflowLogger(Logger):
    """Logs each result's numbers (each value once, under its new-stack key, as TensorBoard
    gets them; `tensorboard_legacy_keys` adds the old names) to an MLflow run, at step =
    training iteration (as Tune's MLflowLoggerCallback does), and the config as the run's
    params.

    Settings, from `logger_config["mlflow"]`: `tracking_uri` (default: MLflow's own,
    $MLFLOW_TRACKING_URI or ./mlruns), `registry_uri`, `experiment_name` (default:
    $MLFLOW_EXPERIMENT_NAME, else "Default"; created when missing), `run_name` (default: the
    trial directory's name), `tags` (a dict), `log_params` (default True), `excludes`
    (result keys, or key prefixes, not to log). The run ends (FINISHED) when the Algorithm
    stops.
    """

    def _init(self) -> None:
        import_tracking_package("mlflow", "MLflowLogger", install_hint("mlflow"))
        from mlflow.tracking import MlflowClient

        settings = tracking_settings(self.logger_config, SECTION, "MLflow")
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ConfigError(f"logger_config['mlflow'] has unknown setting(s) {unknown}; known: {list(SETTINGS)}.")
        self._excludes = tuple(settings.get("excludes", ()))
        self._legacy = legacy_keys(self.logger_config)
        self._client = MlflowClient(tracking_uri=settings.get("tracking_uri"), registry_uri=settings.get("registry_uri"))
        name = settings.get("experiment_name") or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "Default"
        experiment = self._client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment is not None else self._client.create_experiment(name)
        run = self._client.create_run(experiment_id, run_name=settings.get("run_name") or
                                      os.path.basename(self.logdir.rstrip(os.sep)), tags=settings.get("tags"))
        self._run_id: str | None = run.info.run_id
        if settings.get("log_params", True):
            self._log_params(run.info.run_id, config_dict(self.config))

    def _log_params(self, run_id: str, config: dict[str, Any]) -> None:
        from mlflow.entities import Param

        params = [Param(mlflow_key(key), str(value)[:_MAX_PARAM_CHARS]) for key, value in flatten_result(config).items()]
        for i in range(0, len(params), _PARAMS_PER_BATCH):
            self._client.log_batch(run_id, params=params[i:i + _PARAMS_PER_BATCH])

    def on_result(self, result: dict[str, Any]) -> None:
        """Log the result's numbers at step `training_iteration`."""
        run_id = self._run_id
        if run_id is None:
            return
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        step = int(result.get("training_iteration") or 0)
        metrics = [Metric(mlflow_key(key), value, now_ms, step)
                   for key, value in scalar_metrics(result, self._legacy, self._excludes).items()]
        for i in range(0, len(metrics), _METRICS_PER_BATCH):
            self._client.log_batch(run_id, metrics=metrics[i:i + _METRICS_PER_BATCH])

    def close(self) -> None:
        """End the MLflow run (status FINISHED)."""
        run_id, self._run_id = self._run_id, None
        if run_id is not None:
            self._client.set_terminated(run_id)


def mlflow_key(key: str) -> str:
    """`key` as MLflow accepts a metric or param name: characters it refuses become '_'."""
    return _BAD_KEY_CHARS.sub("_", key)[:_MAX_KEY_CHARS]
