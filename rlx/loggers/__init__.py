"""Result loggers: where each train() result goes (result.json, progress.csv, TensorBoard).

RLlib takes these from Ray Tune (`ray.tune.logger`); rlx ships its own, with the same
names and the same constructor `Logger(config, logdir)`. An Algorithm writes every result
through its logger: by default a UnifiedLogger into `~/rlx_results/<ALGO>_<ENV>_<time>_<id>/`;
`config.debugging(logger_config={"type": ..., "logdir": ...})` or a `logger_creator`
chooses otherwise. `logger_config={"wandb": {...}}` / `{"mlflow": {...}}` adds a
Weights & Biases / MLflow run to the default loggers (WandbLogger, MLflowLogger).
"""
from rlx.loggers.csv_logger import CSVLogger
from rlx.loggers.json_logger import JsonLogger
from rlx.loggers.logger import Logger, NoopLogger, flatten_result, json_safe
from rlx.loggers.mlflow_logger import MLflowLogger
from rlx.loggers.pretty import pretty_print
from rlx.loggers.tbx_logger import TBXLogger
from rlx.loggers.unified_logger import DEFAULT_LOGGERS, UnifiedLogger
from rlx.loggers.wandb_logger import WandbLogger

__all__ = [
    "CSVLogger",
    "DEFAULT_LOGGERS",
    "JsonLogger",
    "Logger",
    "MLflowLogger",
    "NoopLogger",
    "TBXLogger",
    "UnifiedLogger",
    "WandbLogger",
    "flatten_result",
    "json_safe",
    "pretty_print",
]
