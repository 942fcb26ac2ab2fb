"""UnifiedLogger: several loggers behind one (JSON, CSV and TensorBoard by default)."""
from __future__ import annotations

import os
from typing import Any

from rlx.loggers.csv_logger import CSVLogger
from rlx.loggers.json_logger import JsonLogger
from rlx.loggers.logger import Logger, make_logger
from rlx.loggers.mlflow_logger import MLflowLogger
from rlx.loggers.tbx_logger import TBXLogger
from rlx.loggers.wandb_logger import WandbLogger

DEFAULT_LOGGERS: tuple[type[Logger], ...] = (JsonLogger, CSVLogger, TBXLogger)
#: Loggers added when `logger_config` has settings under their key.
TRACKING_LOGGERS: dict[str, type[Logger]] = {"wandb": WandbLogger, "mlflow": MLflowLogger}


class UnifiedLogger(Logger):
    """Sends each result to every logger of `loggers` (default: JsonLogger, CSVLogger,
    TBXLogger), all writing into the same `logdir`, plus WandbLogger / MLflowLogger when
    `logger_config` has a "wandb" / "mlflow" dict of their settings."""

    def __init__(self, config: Any, logdir: str | os.PathLike, trial: Any = None,
                 loggers: list[type[Logger]] | tuple[type[Logger], ...] | None = None,
                 logger_config: dict | None = None):
        self._logger_classes = tuple(DEFAULT_LOGGERS if loggers is None else loggers)
        super().__init__(config, logdir, trial, logger_config)

    def _init(self) -> None:
        classes = list(self._logger_classes)
        classes += [cls for key, cls in TRACKING_LOGGERS.items()
                    if self.logger_config.get(key) is not None and cls not in classes]
        self._loggers: list[Any] = []
        try:
            for cls in classes:
                self._loggers.append(make_logger(cls, self.config, self.logdir, self.logger_config))
        except BaseException:
            self.close()  # the files already opened (a W&B run that failed to start leaves none)
            raise

    def add(self, logger: Any) -> None:
        """Send the next results to `logger` too, and close it with this one."""
        self._loggers.append(logger)

    def on_result(self, result: dict[str, Any]) -> None:
        """Pass `result` to every logger."""
        for lg in self._loggers:
            lg.on_result(result)

    def update_config(self, config: Any) -> None:
        """Pass the new config to every logger."""
        for lg in self._loggers:
            lg.update_config(config)

    def flush(self) -> None:
        """Flush every logger."""
        for lg in self._loggers:
            lg.flush()

    def close(self) -> None:
        """Close every logger."""
        for lg in self._loggers:
            lg.close()
