"""TBXLogger: TensorBoard event files through tensorboardX."""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from rlx.loggers.logger import Logger, iter_flat

logger = logging.getLogger("rlx")

#: Result keys that are not training curves.
_SKIPPED = {"training_iteration", "timestamp", "pid", "done", "time_this_iter_s"}


class TBXLogger(Logger):
    """Writes every numeric result as a TensorBoard scalar (tag = flat key such as
    `env_runners/episode_return_mean`, step = `training_iteration`) and every non-empty
    list of numbers (`hist_stats`) as a histogram. `tensorboard --logdir ~/rlx_results`
    shows them.

    `logger_config={"tensorboard_flush_secs": N}` sets how often tensorboardX flushes
    (default: after every result).
    """

    def _init(self) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError as err:  # pragma: no cover - tensorboardX is a dependency
            raise ImportError(
                "TBXLogger writes TensorBoard files with tensorboardX, which is not installed: "
                "pip install tensorboardX"
            ) from err
        flush_secs = int(self.logger_config.get("tensorboard_flush_secs", 120))
        self._writer = SummaryWriter(self.logdir, flush_secs=flush_secs)
        self._flush_each = "tensorboard_flush_secs" not in self.logger_config

    def on_result(self, result: dict[str, Any]) -> None:
        """Add the result's numbers at step `training_iteration`."""
        from tensorboardX.proto.summary_pb2 import Summary

        step = int(result.get("training_iteration", 0) or 0)
        writer = self._writer
        scalars = []
        for key, value in iter_flat(result):
            if key in _SKIPPED or isinstance(value, (str, bool)) or value is None:
                continue
            if isinstance(value, (int, float, np.integer, np.floating)):
                if math.isfinite(float(value)):
                    scalars.append(Summary.Value(tag=key, simple_value=float(value)))
            elif isinstance(value, (list, tuple, np.ndarray)) and len(value) > 0:
                arr = np.asarray(value)
                if arr.dtype.kind in "iuf" and np.all(np.isfinite(arr)):
                    writer.add_histogram(key, arr.astype(np.float64), global_step=step)
        # One event holding every scalar: ~15x cheaper than an add_scalar() call per key.
        writer._get_file_writer().add_summary(Summary(value=scalars), step)
        if self._flush_each:
            writer.flush()

    def flush(self) -> None:
        """Flush the event file."""
        self._writer.flush()

    def close(self) -> None:
        """Close the event file."""
        self._writer.close()
