"""TBXLogger: TensorBoard event files through tensorboardX.

A run's curves look the same whether it was started with `algo.train()` or `rlx train`: each
value once, under its new-stack key, the return and episode length first
(rlx.loggers.tensorboard_layout); every step is the number of env steps sampled so far.
`logger_config={"tensorboard_legacy_keys": True}` writes Ray Tune's layout instead (every key,
old names included, as `ray/tune/<key>`), as Tune's TBXLoggerCallback does for a trial.
"""
from __future__ import annotations

import math
import os
import socket
import time
from typing import Any

import numpy as np

from rlx.loggers.logger import Logger, close_quietly, flatten_result
from rlx.loggers.tensorboard_layout import LEGACY_KEYS_OPTION, drawn_items
from rlx.utils.errors import ConfigError
from rlx.utils.install_hints import install_command

#: The result keys Ray Tune's TBXLoggerCallback leaves out: not training curves.
_SKIPPED = {"config", "pid", "timestamp", "time_total_s", "training_iteration"}
#: What a TBXLogger writes, as its warning on a failed write names it.
_WHAT = "TensorBoard events"
#: The first record of every event file, as tensorboardX writes it.
_FILE_VERSION = "brain.Event:2"
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


class TBXLogger(Logger):
    """Writes every numeric result as a TensorBoard scalar and every non-empty list of
    numbers (`env_runners/hist_stats/...`) as a histogram, each value once under its
    new-stack key, the headline curves first (`1_return/env_runners/episode_return_mean`;
    see rlx.loggers.tensorboard_layout), at step = env steps sampled so far
    (`tensorboard_step`). `tensorboard --logdir ~/rlx_results` shows them.

    `logger_config={"tensorboard_legacy_keys": True}` writes Ray Tune's layout instead: every
    key, the old names (`episode_reward_mean`, `info/learner/...`) included, as
    `ray/tune/<key>`, for comparing with runs logged that way.

    `logger_config={"tensorboard_flush_secs": N}` sets how often the event file is flushed
    (default: after a result when a second has passed since the last flush, so a live
    TensorBoard is at most a second behind).

    Events are written here, on the training thread, with tensorboardX's RecordWriter
    rather than its SummaryWriter: the SummaryWriter writes on a background thread, where
    a failed write (a full disk) prints a traceback, kills the thread and then blocks the
    next results on its full queue. Here such an OSError logs one warning and stops the
    TensorBoard output of the run; training goes on.
    """

    def _init(self) -> None:
        try:
            from tensorboardX.record_writer import RecordWriter
        except ImportError as err:  # pragma: no cover - tensorboardX is a dependency
            raise ImportError(
                "TBXLogger writes TensorBoard files with tensorboardX, which is not installed: "
                f"{install_command()} installs it with rlx"
            ) from err
        from tensorboardX.proto.event_pb2 import Event

        self._flush_secs = float(self.logger_config.get("tensorboard_flush_secs", 1.0))
        self._legacy = self.logger_config.get(LEGACY_KEYS_OPTION, False)
        if not isinstance(self._legacy, bool):
            raise ConfigError(f"logger_config[{LEGACY_KEYS_OPTION!r}] must be True or False, got {self._legacy!r}.")
        self._last_flush = -math.inf  # the first result is flushed at once
        self._records: Any = None
        with self._writing(_WHAT):
            self._records = RecordWriter(os.path.join(self.logdir, event_file_name()))
            self._write(Event(wall_time=time.time(), file_version=_FILE_VERSION))

    def on_result(self, result: dict[str, Any]) -> None:
        """Add the result's numbers at step `tensorboard_step(result)`."""
        if self._records is None:
            return
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        # One event holding every value: ~15x cheaper than an add_scalar() call per key.
        event = Event(wall_time=time.time(), step=tensorboard_step(result),
                      summary=Summary(value=_summary_values(result, self._legacy)))
        with self._writing(_WHAT):
            self._write(event)
            if time.monotonic() - self._last_flush >= self._flush_secs:
                self._records.flush()
                self._last_flush = time.monotonic()

    def _write(self, event: Any) -> None:
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        """Flush the event file."""
        if self._records is not None:
            with self._writing(_WHAT):
                self._records.flush()
                self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close the event file."""
        if self._records is not None:
            with self._writing(_WHAT):
                self._records.flush()
                self._records.close()
            self._records = None

    def _discard(self) -> None:
        records, self._records = self._records, None
        if records is not None:
            close_quietly(records)


def event_file_name() -> str:
    """`events.out.tfevents.<time>.<host>`, the name tensorboardX gives an event file."""
    return f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"


def _summary_values(result: dict[str, Any], legacy: bool = False) -> list[Any]:
    """The Summary.Values of a result: its numbers as scalars, its lists as histograms, tagged
    as `rlx.loggers.tensorboard_layout.drawn_items` says (`legacy`: Ray Tune's layout)."""
    from tensorboardX.proto.summary_pb2 import Summary

    values = []
    # id(list) -> its histogram: the old top-level hist_stats/ holds the very lists of
    # env_runners/hist_stats/, drawn under both tags as Tune does, computed once.
    histograms: dict[int, Any] = {}
    flat = {key: value for key, value in flatten_result(result).items()
            if key not in _SKIPPED and value is not None and not isinstance(value, str)}
    for tag, value in drawn_items(flat, legacy):
        number = _scalar(value)
        if number is not None:
            # Like Tune: NaN is left out (no point), infinities are drawn.
            if not math.isnan(number):
                values.append(Summary.Value(tag=tag, simple_value=number))
        elif _is_video(value) or (isinstance(value, (list, tuple)) and value and all(map(_is_video, value))):
            # Episode videos (1, T, C, H, W), e.g. logged by a callback with reduce=None: drawn
            # as TensorBoard videos when moviepy is installed (tensorboardX encodes with it),
            # left out otherwise.
            values.extend(_video_values(tag, value))
        elif isinstance(value, (list, tuple, np.ndarray)) and len(value) > 0:
            if id(value) not in histograms:
                histograms[id(value)] = _histogram(value)
            if histograms[id(value)] is not None:
                values.append(Summary.Value(tag=tag, histo=histograms[id(value)]))
    return values


def _scalar(value: Any) -> float | None:
    """`value` as a float when it is one number (bools too, as Tune draws them), else None."""
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        return float(value)
    return None


def _histogram(value: Any) -> Any:
    """The TensorBoard histogram of a list of finite numbers; None for any other list (one
    holding arrays, strings or dicts)."""
    from tensorboardX.summary import make_histogram

    if not isinstance(value, np.ndarray) and not all(
            isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)) for v in value):
        return None
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "biuf" or not np.all(np.isfinite(arr)):
        return None
    return make_histogram(arr.astype(np.float64), _HISTOGRAM_BINS)


def _is_video(value: Any) -> bool:
    """Whether `value` is one video batch: an array (N, T, C, H, W) with C 1, 3 or 4."""
    return isinstance(value, np.ndarray) and value.ndim == 5 and value.shape[2] in (1, 3, 4)


_MOVIEPY: list[bool] = []


def _video_values(tag: str, value: Any) -> list[Any]:
    """Summary.Values drawing a video (or a list of videos, as tag/0, tag/1, ...); none when
    moviepy, which tensorboardX encodes videos with, is not installed."""
    if not _MOVIEPY:
        import importlib.util

        _MOVIEPY.append(importlib.util.find_spec("moviepy") is not None)
    if not _MOVIEPY[0]:
        return []
    from tensorboardX.summary import video

    videos = [(tag, value)] if isinstance(value, np.ndarray) else [(f"{tag}/{i}", v) for i, v in enumerate(value)]
    out = []
    for name, v in videos:
        if v.dtype.kind == "f":
            v = np.clip(v, 0.0, 1.0)
        try:
            out.extend(video(name, v, fps=4).value)
        except Exception:  # noqa: BLE001 - a video that cannot be encoded is left out, training goes on
            continue
    return out
