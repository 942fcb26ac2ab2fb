"""TBXLogger: TensorBoard event files through tensorboardX, in Ray Tune's layout.

A run looks the same in TensorBoard whether it was started with `algo.train()`, `rlx
train` or Ray Tune (whose own TBXLoggerCallback writes a trial's events): every tag is
`ray/tune/<flat result key>` and every step is the number of env steps sampled so far.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from rlx.loggers.logger import Logger, iter_flat

logger = logging.getLogger("rlx")

#: Prefix of every tag, as Ray Tune's TBXLoggerCallback writes it.
TAG_PREFIX = "ray/tune/"
#: The result keys Ray Tune's TBXLoggerCallback leaves out: not training curves.
_SKIPPED = {"config", "pid", "timestamp", "time_total_s", "training_iteration"}
#: Fixed bins cost half of tensorboardX's default 'tensorflow' binning per histogram.
_HISTOGRAM_BINS = 30


def tensorboard_step(result: dict[str, Any]) -> int:
    """The x-axis value of a result in TensorBoard: env steps sampled so far.

    Ray Tune's rule (`timesteps_total`, else `training_iteration`), with
    `num_env_steps_sampled_lifetime` (what rlx reports as `timesteps_total`) in between for
    results that lack the old key.
    """
    steps = result.get("timesteps_total") or result.get("num_env_steps_sampled_lifetime")
    return int(steps or result.get("training_iteration") or 0)


def tensorboard_tag(key: str) -> str:
    """The TensorBoard tag of a flat result key: 'env_runners/episode_return_mean' ->
    'ray/tune/env_runners/episode_return_mean'."""
    return TAG_PREFIX + key


class TBXLogger(Logger):
    """Writes every numeric result as a TensorBoard scalar and every non-empty list of
    numbers (`env_runners/hist_stats/...`) as a histogram, in Ray Tune's layout: tag
    `ray/tune/<flat key>` (e.g. `ray/tune/env_runners/episode_return_mean`), step =
    env steps sampled so far (`tensorboard_step`). `tensorboard --logdir ~/rlx_results`
    shows them.

    `logger_config={"tensorboard_flush_secs": N}` sets how often tensorboardX flushes
    (default: after a result when a second has passed since the last flush, so a live
    TensorBoard is at most a second behind).
    """

    def _init(self) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError as err:  # pragma: no cover - tensorboardX is a dependency
            raise ImportError(
                "TBXLogger writes TensorBoard files with tensorboardX, which is not installed: "
                "pip install -c constraints.txt -e . (in your rlx checkout) installs it with rlx"
            ) from err
        flush_secs = int(self.logger_config.get("tensorboard_flush_secs", 120))
        self._writer = SummaryWriter(self.logdir, flush_secs=flush_secs)
        self._flush_each = "tensorboard_flush_secs" not in self.logger_config
        self._last_flush = 0.0

    def on_result(self, result: dict[str, Any]) -> None:
        """Add the result's numbers at step `tensorboard_step(result)`."""
        from tensorboardX.proto.summary_pb2 import Summary

        values = []
        # id(list) -> its histogram: the old top-level hist_stats/ holds the very lists of
        # env_runners/hist_stats/, drawn under both tags as Tune does, computed once.
        histograms: dict[int, Any] = {}
        for key, value in iter_flat(result):
            if key in _SKIPPED or value is None or isinstance(value, str):
                continue
            number = _scalar(value)
            if number is not None:
                # Like Tune: NaN is left out (no point), infinities are drawn.
                if not math.isnan(number):
                    values.append(Summary.Value(tag=tensorboard_tag(key), simple_value=number))
            elif isinstance(value, (list, tuple, np.ndarray)) and len(value) > 0:
                if id(value) not in histograms:
                    histograms[id(value)] = _histogram(value)
                if histograms[id(value)] is not None:
                    values.append(Summary.Value(tag=tensorboard_tag(key), histo=histograms[id(value)]))
        # One event holding every value: ~15x cheaper than an add_scalar() call per key.
        self._writer._get_file_writer().add_summary(Summary(value=values), tensorboard_step(result))
        if self._flush_each and time.monotonic() - self._last_flush >= 1.0:
            self._writer.flush()
            self._last_flush = time.monotonic()

    def flush(self) -> None:
        """Flush the event file."""
        self._writer.flush()

    def close(self) -> None:
        """Close the event file."""
        self._writer.close()


def _scalar(value: Any) -> float | None:
    """`value` as a float when it is one number (bools too, as Tune draws them), else None."""
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        return float(value)
    return None


def _histogram(value: Any) -> Any:
    """The TensorBoard histogram of a list of finite numbers; None for any other list."""
    from tensorboardX.summary import make_histogram

    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
        return None
    return make_histogram(arr.astype(np.float64), _HISTOGRAM_BINS)
