"""What the experiment-tracking loggers (W&B, MLflow) share: the numbers of a result they log,
their settings from `logger_config`, and importing their optional package with an install hint."""
from __future__ import annotations

import importlib
import math
from types import ModuleType
from typing import Any

import numpy as np

from rlx.loggers.logger import flatten_result
from rlx.loggers.tensorboard_layout import LEGACY_KEYS_OPTION, drawn_keys
from rlx.utils.errors import ConfigError

#: Result keys that are no metric (Tune's loggers leave them out too).
_NOT_METRICS = frozenset({"config", "pid", "timestamp"})


def import_tracking_package(module: str, who: str, hint: str) -> ModuleType:
    """Import optional package `module` for logger `who`; a missing one is an ImportError that
    says how to install it (`hint`, e.g. install_hint("wandb"))."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{who} needs the {module} package, which is not installed: {hint}") from err


def scalar_metrics(result: dict[str, Any], legacy: bool = False, excludes: tuple[str, ...] = ()) -> dict[str, float]:
    """The numbers of a result to log, by flat key ('env_runners/episode_return_mean'): each
    value once under its new-stack key, as TensorBoard draws them (`legacy`: every key, the
    old names included). NaN, bools, lists and strings are left out, and keys starting with
    one of `excludes`."""
    flat = {k: v for k, v in flatten_result(result).items() if k not in _NOT_METRICS and not k.startswith(excludes)}
    out = {}
    for key in drawn_keys(flat, legacy):
        value = flat[key]
        if _is_number(value) and not math.isnan(float(value)):
            out[key] = float(value)
    return out


def _is_number(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in "iuf"
    return isinstance(value, (int, float, np.integer, np.floating))


def tracking_settings(logger_config: dict[str, Any], section: str, who: str) -> dict[str, Any]:
    """A copy of `logger_config[section]` (e.g. "wandb"): the settings of logger `who`, a dict
    (missing: no settings)."""
    settings = logger_config.get(section)
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise ConfigError(f"logger_config[{section!r}] must be a dict of {who} settings, got {settings!r}.")
    return dict(settings)


def legacy_keys(logger_config: dict[str, Any]) -> bool:
    """Whether `logger_config` asks for the old result names too (`tensorboard_legacy_keys`)."""
    return logger_config.get(LEGACY_KEYS_OPTION, False) is True


def with_tracking(logger_config: dict[str, Any] | None, wandb_project: str | None = None,
                  mlflow_uri: str | None = None) -> dict[str, Any]:
    """`logger_config` plus a W&B project and/or an MLflow tracking URI (what `rlx train
    --wandb-project P --mlflow-uri URI` asks for), keeping the other settings already there."""
    out = dict(logger_config or {})
    if wandb_project:
        out["wandb"] = {**tracking_settings(out, "wandb", "W&B"), "project": wandb_project}
    if mlflow_uri:
        out["mlflow"] = {**tracking_settings(out, "mlflow", "MLflow"), "tracking_uri": mlflow_uri}
    return out
