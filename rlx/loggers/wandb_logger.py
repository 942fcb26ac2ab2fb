"""WandbLogger: each training result's numbers to a Weights & Biases run, without Ray Tune.

    config.debugging(logger_config={"wandb": {"project": "my-project"}})

adds it to the default loggers (result.json, progress.csv, TensorBoard); `rlx train
--wandb-project my-project` does the same. wandb is imported when the logger starts, so it is
needed only by runs that use it (the `wandb` extra, or `pip install wandb`).
"""
from __future__ import annotations

import os
from typing import Any

from rlx.loggers.logger import Logger, json_safe
from rlx.loggers.tracking import import_tracking_package, legacy_keys, scalar_metrics, tracking_settings
from rlx.utils.errors import install_hint

#: The `logger_config` key holding the settings.
SECTION = "wandb"


class WandbLogger(Logger):
    """Logs each result's numbers (each value once, under its new-stack key, as TensorBoard
    gets them; `tensorboard_legacy_keys` adds the old names) to a W&B run, and the config as
    the run's config.

    Settings, from `logger_config["wandb"]`: `project` (default: $WANDB_PROJECT, else
    "rlx"), `excludes` (result keys, or key prefixes, not to log), `log_config` (default True)
    and anything else `wandb.init()` takes (`entity`, `group`, `name`, `tags`, `mode`
    ("offline" logs without an account), `dir`, ...). By default the run is named after the
    trial directory and writes its local files there.
    """

    def _init(self) -> None:
        wandb = import_tracking_package("wandb", "WandbLogger", install_hint("wandb"))
        settings = tracking_settings(self.logger_config, SECTION, "W&B")
        self._excludes = tuple(settings.pop("excludes", ()))
        self._legacy = legacy_keys(self.logger_config)
        if settings.pop("log_config", True):
            settings.setdefault("config", config_dict(self.config))
        settings.setdefault("project", os.environ.get("WANDB_PROJECT", "rlx"))
        settings.setdefault("name", os.path.basename(self.logdir.rstrip(os.sep)))
        settings.setdefault("dir", self.logdir)
        # Each Algorithm gets its own run, also when several train in one process.
        settings.setdefault("reinit", "create_new")
        self._run: Any = wandb.init(**settings)

    def on_result(self, result: dict[str, Any]) -> None:
        """Log the result's numbers as one W&B step."""
        if self._run is not None:
            self._run.log(scalar_metrics(result, self._legacy, self._excludes))

    def close(self) -> None:
        """Finish the W&B run (uploads what is left; offline runs are complete on disk)."""
        run, self._run = self._run, None
        if run is not None:
            run.finish()


def config_dict(config: Any) -> dict[str, Any]:
    """A JSON-safe dict of a trial's config (an AlgorithmConfig or a dict)."""
    as_dict = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    return json_safe(as_dict)
