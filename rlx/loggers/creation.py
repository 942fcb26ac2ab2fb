"""How an Algorithm gets its result logger: a `logger_creator`, `logger_config`, or the default."""
from __future__ import annotations

import os
import re
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from rlx.loggers.logger import make_logger
from rlx.loggers.unified_logger import UnifiedLogger
from rlx.utils.errors import ConfigError
from rlx.utils.registry import import_object

#: Characters replaced in the parts of a trial directory's name, and the longest part kept
#: (two parts plus the time stamp and id stay under the usual 255-byte limit of a name).
_UNSAFE_NAME_CHARS = re.compile(r"[/\\:\x00]")
_MAX_NAME_PART_BYTES = 100
#: Tune's logger paths, accepted in `logger_config["type"]` for configs written for RLlib.
_TUNE_PREFIXES = ("ray.tune.logger.", "ray.tune.logger:")


def results_root() -> Path:
    """Where trial directories go by default: $RLX_RESULTS_DIR, else ~/rlx_results."""
    return Path(os.environ.get("RLX_RESULTS_DIR", "~/rlx_results")).expanduser()


def trial_dir_name(algo_name: str, env: Any) -> str:
    """`<ALGO>_<ENV>_<timestamp>_<id>`, the name of one trial's directory: always one
    directory name (separators in the env id become '_'), so it stays inside its parent."""
    env_name = _name_part(env) if isinstance(env, str) else "env"
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return f"{_name_part(algo_name)}_{env_name}_{stamp}_{uuid.uuid4().hex[:6]}"


def _name_part(text: str) -> str:
    """`text` usable inside one directory name: no path separators, ':' or NUL, and short
    enough that the whole name fits the usual 255-byte limit."""
    safe = _UNSAFE_NAME_CHARS.sub("_", str(text))
    return safe.encode("utf-8", "ignore")[:_MAX_NAME_PART_BYTES].decode("utf-8", "ignore")


def resolve_logger_class(spec: Any) -> type:
    """A logger class from a class or an import path ('rlx.loggers.JsonLogger',
    'mypkg.mod:MyLogger', or Tune's 'ray.tune.logger.X' names)."""
    if isinstance(spec, type):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(f"logger_config['type'] must be a Logger class or its import path, got {spec!r}.")
    name = spec
    for prefix in _TUNE_PREFIXES:
        if name.startswith(prefix):
            name = "rlx.loggers." + name[len(prefix):]
    if ":" not in name and "." in name:
        module, _, attr = name.rpartition(".")
        name = f"{module}:{attr}"
    try:
        cls = import_object(name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"logger_config['type']={spec!r} cannot be imported: {err}.") from err
    if not isinstance(cls, type):
        raise ConfigError(f"logger_config['type']={spec!r} is not a class.")
    return cls


def create_result_logger(config: Any, algo_name: str, logger_creator: Any = None,
                         logdir: str | os.PathLike | None = None) -> Any:
    """The result logger of a new trial of `algo_name` with `config` (an AlgorithmConfig).

    `logger_creator(config)` wins when given. Otherwise `config.logger_config` may name a
    `type` (default: UnifiedLogger) and a `logdir` (default: a new trial directory under
    `results_root()`); its other keys are options for the loggers. `logdir`, when given,
    wins over both defaults (the CLI places trials under its experiment directory).
    """
    if logger_creator is not None:
        result_logger = logger_creator(config)
        if result_logger is None or not callable(getattr(result_logger, "on_result", None)):
            raise ConfigError(
                f"logger_creator returned {result_logger!r}; it must return a Logger "
                "(an object with on_result(result), flush() and close())."
            )
        return result_logger
    logger_config = dict(config.logger_config or {})
    cls = resolve_logger_class(logger_config.pop("type", UnifiedLogger))
    configured_logdir = logger_config.pop("logdir", None)
    logdir = logdir if logdir is not None else configured_logdir
    if logdir is None:
        logdir = results_root() / trial_dir_name(algo_name, config.env)
    return make_logger(cls, config, Path(str(logdir)).expanduser(), logger_config)
