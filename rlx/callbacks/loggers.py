"""W&B and MLflow as callbacks, for plain `algo.train()` runs (no Ray Tune):

    import functools
    config.callbacks(functools.partial(WandbLoggerCallback, project="my-project", mode="offline"))
    config.callbacks(functools.partial(MLflowLoggerCallback, tracking_uri="file:///tmp/mlruns"))

Each starts its run at the first training result and logs every result to it (through
rlx.loggers.WandbLogger / MLflowLogger, so the same numbers as `logger_config={"wandb": ...}`
logs). With the default result logger the run ends when the Algorithm stops; with another
result logger, when the Algorithm is garbage-collected or the process exits.
"""
from __future__ import annotations

import weakref
from typing import Any

from rlx.callbacks.rllib_callback import RLlibCallback
from rlx.loggers.logger import Logger
from rlx.loggers.mlflow_logger import MLflowLogger
from rlx.loggers.wandb_logger import WandbLogger


class _TrackingLoggerCallback(RLlibCallback):
    """Logs each training result through a tracking logger made from this callback's settings."""

    #: The logger class and its `logger_config` key.
    logger_class: type[Logger] = Logger
    section = ""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self._logger: Logger | None = None
        self._owner: Any = None  # the result logger that sends results to ours, if any

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        """Start the run on the first result; log `result` (directly, or through the
        Algorithm's result logger when that can take ours along)."""
        owner = algorithm.result_logger
        if self._logger is not None and (self._owner is None or self._owner is owner):
            if self._owner is None:
                self._logger.on_result(result)
            return
        # First result, or the Algorithm was stopped and trains on with a new result logger.
        logger_config = {**(algorithm.config.logger_config or {}), self.section: dict(self.settings)}
        self._logger = self.logger_class(algorithm.config, algorithm.logdir, logger_config=logger_config)
        if callable(getattr(owner, "add", None)):
            owner.add(self._logger)  # it gets this result next, and closes the run at algo.stop()
            self._owner = owner
        else:
            self._owner = None
            weakref.finalize(algorithm, self._logger.close)
            self._logger.on_result(result)


class WandbLoggerCallback(_TrackingLoggerCallback):
    """Logs each training result to a Weights & Biases run; keyword arguments are
    WandbLogger's settings (`project`, `excludes`, `log_config`, and anything `wandb.init()`
    takes, e.g. `mode="offline"`, `group`, `entity`)."""

    logger_class = WandbLogger
    section = "wandb"


class MLflowLoggerCallback(_TrackingLoggerCallback):
    """Logs each training result to an MLflow run; keyword arguments are MLflowLogger's
    settings (`tracking_uri`, `experiment_name`, `run_name`, `tags`, `log_params`,
    `excludes`)."""

    logger_class = MLflowLogger
    section = "mlflow"
