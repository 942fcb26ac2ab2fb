"""The Logger interface and the helpers every logger shares (JSON safety, key flattening)."""
from __future__ import annotations

import contextlib
import inspect
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

logger = logging.getLogger("rlx")


class Logger:
    """Receives each training result of one trial and writes it somewhere under `logdir`.

    Subclasses override `_init()` (open files), `on_result(result)`, `flush()` and
    `close()`. `config` is the trial's config (a dict or an AlgorithmConfig) and
    `logger_config` the `config.debugging(logger_config=...)` dict, for loggers that take
    options of their own.

    A write that fails with an OSError (a full disk, a lost mount) does not fail training:
    loggers run their writes under `_writing(what)`, which logs one warning and stops the
    logger for the rest of the run (`write_failed` becomes True).
    """

    #: Whether a write failed, after which the logger writes nothing more.
    write_failed = False

    def __init__(self, config: Any, logdir: str | os.PathLike, trial: Any = None,
                 logger_config: dict | None = None):
        self.config = config
        self.logdir = str(logdir)
        self.trial = trial
        self.logger_config = dict(logger_config or {})
        Path(self.logdir).mkdir(parents=True, exist_ok=True)
        self._init()

    def _init(self) -> None:
        """Open whatever the logger writes to; called once from the constructor."""

    def on_result(self, result: dict[str, Any]) -> None:
        """Write one training result."""
        raise TypeError(f"{type(self).__name__} must implement on_result(result)")

    def update_config(self, config: Any) -> None:
        """Record a changed trial config."""

    def flush(self) -> None:
        """Push buffered output to disk."""

    def close(self) -> None:
        """Flush and release files; called once when the trial ends."""
        self.flush()

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """Run a write of `what` (e.g. "result.json"); an OSError stops the logger (see
        `_stop_writing`) instead of reaching train()."""
        try:
            yield
        except OSError as err:
            self._stop_writing(what, err)

    def _stop_writing(self, what: str, err: OSError) -> None:
        """Warn once, naming the directory and the error, then write nothing more."""
        if self.write_failed:
            return
        self.write_failed = True
        reason = " ".join(str(err).split()) or type(err).__name__
        logger.warning("Stopped writing %s to %s for this run: %s (training goes on).", what, self.logdir, reason)
        self._discard()

    def _discard(self) -> None:
        """Release the files of a logger that stopped writing, ignoring further errors."""


def make_logger(cls: type, config: Any, logdir: str | os.PathLike | None, logger_config: dict) -> Any:
    """Instantiate a logger class; rlx loggers also get `logger_config`, others (Tune-style
    classes taking `(config, logdir)`) do not."""
    if issubclass(cls, Logger) and "logger_config" in inspect.signature(cls.__init__).parameters:
        return cls(config, logdir, logger_config=logger_config)
    return cls(config, logdir)


def close_quietly(file: Any) -> None:
    """Close `file`, ignoring an OSError: its buffered data could not be written anyway
    (Python closes the underlying descriptor even when the final flush fails)."""
    if file is None:
        return
    try:
        file.close()
    except OSError:
        pass


class NoopLogger(Logger):
    """A logger that writes nothing (`logger_config={"type": "rlx.loggers.NoopLogger"}`)."""

    def __init__(self, config: Any = None, logdir: str | os.PathLike | None = None, trial: Any = None,
                 logger_config: dict | None = None):
        # Unlike the other loggers it creates no directory; logdir may be None.
        self.config = config
        self.logdir = None if logdir is None else str(logdir)
        self.trial = trial
        self.logger_config = dict(logger_config or {})

    def on_result(self, result: dict[str, Any]) -> None:
        """Ignore the result."""


def json_safe(value: Any) -> Any:
    """`value` with numpy types turned into Python ones, NaN/inf into None, tuples and sets
    into lists, and anything else unknown (classes, functions, objects) into a string."""
    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass
        return json_safe(value.item())
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        return json_safe(value.detach().cpu().numpy())
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module and qualname and (isinstance(value, type) or callable(value)):
        return f"{module}:{qualname}"
    return repr(value)


def iter_flat(result: dict[str, Any], prefix: str = "", delimiter: str = "/") -> Iterator[tuple[str, Any]]:
    """(key, value) of every leaf of a nested dict, nested keys joined by `delimiter`."""
    for key, value in result.items():
        name = f"{prefix}{delimiter}{key}" if prefix else str(key)
        if isinstance(value, dict):
            yield from iter_flat(value, name, delimiter)
        else:
            yield name, value


def flatten_result(result: dict[str, Any], delimiter: str = "/") -> dict[str, Any]:
    """The result as one flat dict, nested keys joined by `delimiter` ('env_runners/episode_return_mean')."""
    return dict(iter_flat(result, "", delimiter))


def is_scalar(value: Any) -> bool:
    """Whether `value` is a single number, bool, string or None (a CSV cell)."""
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0
