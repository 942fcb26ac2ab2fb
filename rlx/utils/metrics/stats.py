"""RLlib's ``Stats``: the values logged under one MetricsLogger key and how to reduce them.

A Stats reduces its values with "mean", "min", "max", "sum" or None (keep them all), over a
sliding window or, for "mean" without a window, as an exponential moving average (EMA); it
merges the Stats of several loggers (rlx.utils.metrics.metrics_logger) and checkpoints its state.
"""
from __future__ import annotations

import copy
import math
from collections import deque
from typing import Any, Optional, Union

from rlx.utils.errors import ConfigError, did_you_mean

#: RLlib's default EMA coefficient for reduce="mean" with neither window nor ema_coeff.
DEFAULT_EMA_COEFF = 0.01

REDUCE_METHODS = ("mean", "min", "max", "sum", None)

def check_settings(
    reduce: Optional[str],
    window: Optional[int],
    ema_coeff: Optional[float],
    clear_on_reduce: bool,
) -> tuple:
    """Validate reduce settings and return them normalised (the default EMA filled in)."""
    if reduce == "item_series":  # RLlib's newer name of reduce=None: keep the values as they are
        reduce = None
    if reduce not in REDUCE_METHODS:
        names = [m for m in REDUCE_METHODS if m is not None]
        raise ConfigError(
            f"unknown reduce={reduce!r}; accepted: 'mean', 'min', 'max', 'sum' or None."
            + (did_you_mean(reduce, names) if isinstance(reduce, str) else "")
        )
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"window must be a positive int or None, got {window!r}.")
        if ema_coeff is not None:
            raise ConfigError(
                f"set either window ({window}) or ema_coeff ({ema_coeff}), not both: "
                "window averages the last N values, ema_coeff is an exponential moving average."
            )
    if ema_coeff is not None:
        if reduce != "mean":
            raise ConfigError(f"ema_coeff only applies to reduce='mean', got reduce={reduce!r}.")
        if not 0.0 < ema_coeff <= 1.0:
            raise ConfigError(f"ema_coeff must lie in (0, 1], got {ema_coeff!r}.")
    if reduce == "mean" and window is None and ema_coeff is None:
        ema_coeff = DEFAULT_EMA_COEFF
    return reduce, window, ema_coeff, bool(clear_on_reduce)


def describe_settings(settings: tuple) -> str:
    """The settings tuple of a Stats, as keyword arguments read."""
    reduce, window, ema_coeff, clear = settings
    return f"reduce={reduce!r}, window={window!r}, ema_coeff={ema_coeff!r}, clear_on_reduce={clear!r}"


def as_python_number(value: Any) -> Any:
    """A 1-element array or tensor as a Python number; anything else as it is."""
    # NumPy scalars, 0-d torch tensors and other 1-element arrays become Python numbers; larger
    # arrays (e.g. a video logged with reduce=None) stay as they are. torch is never imported here.
    if hasattr(value, "item"):
        numel = value.numel() if callable(getattr(value, "numel", None)) else getattr(value, "size", 1)
        if numel == 1:
            return value.item()
    return value


class Stats:
    """The values logged under one key and how to reduce them.

    Storage is chosen once, at construction, so that :meth:`push` is a single append or
    accumulator update: a ``deque(maxlen=window)`` when a window is set, a list for
    ``reduce=None``, and one running value (EMA, sum, min or max) otherwise.
    """

    __slots__ = ("reduce_method", "window", "ema_coeff", "clear_on_reduce", "values", "acc", "push", "_args")

    def __init__(
        self,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
    ):
        """Create an empty Stats; raises ConfigError for invalid settings."""
        self._args = (reduce, window, ema_coeff, clear_on_reduce)
        self.reduce_method, self.window, self.ema_coeff, self.clear_on_reduce = check_settings(
            reduce, window, ema_coeff, clear_on_reduce
        )
        self.values: Optional[Union[deque, list]] = None
        self.acc: Any = None
        self._init_storage()

    @property
    def settings(self) -> tuple:
        """(reduce, window, ema_coeff, clear_on_reduce), with the default EMA filled in."""
        return self.reduce_method, self.window, self.ema_coeff, self.clear_on_reduce

    def _init_storage(self) -> None:
        self.acc = None
        if self.window is not None:
            self.values = deque(maxlen=self.window)
            self.push = self.values.append
        elif self.reduce_method is None:
            self.values = []
            self.push = self.values.append
        else:
            self.values = None
            self.push = {
                "mean": self._push_ema,
                "sum": self._push_sum,
                "min": self._push_min,
                "max": self._push_max,
            }[self.reduce_method]

    def _push_ema(self, value: Any) -> None:
        acc = self.acc
        self.acc = float(value) if acc is None else (1.0 - self.ema_coeff) * acc + self.ema_coeff * value

    def _push_sum(self, value: Any) -> None:
        self.acc = value if self.acc is None else self.acc + value

    def _push_min(self, value: Any) -> None:
        if self.acc is None or value < self.acc:
            self.acc = value

    def _push_max(self, value: Any) -> None:
        if self.acc is None or value > self.acc:
            self.acc = value

    def peek(self) -> Any:
        """The reduced value, without changing anything.

        An empty stat peeks as nan ("mean", "min", "max"), 0 ("sum") or [] (None).
        """
        if self.values is None:
            if self.acc is None:
                return 0 if self.reduce_method == "sum" else math.nan
            return self.acc
        values = self.values
        method = self.reduce_method
        if method is None:
            return list(values)
        if not values:
            return 0 if method == "sum" else math.nan
        if method == "mean":
            return sum(values) / len(values)
        if method == "sum":
            return sum(values)
        return min(values) if method == "min" else max(values)

    def reduce(self) -> Any:
        """The reduced value; clears the stat afterwards when it has clear_on_reduce.

        ``reduce=None`` without a window always starts a new list: its result is the
        values logged since the last reduce (an ever-growing list would leak in long runs).
        """
        value = self.peek()
        if self.clear_on_reduce or (self.reduce_method is None and self.window is None):
            self.clear()
        return value

    def clear(self) -> None:
        """Forget every value (an EMA starts again from its next value)."""
        if self.values is not None:
            self.values.clear()
        self.acc = None

    def samples(self) -> list:
        """What this stat contributes to a merge: its raw values, or its running value."""
        if self.values is not None:
            return list(self.values)
        return [] if self.acc is None else [self.acc]

    def merge(self, sources: list) -> None:
        """Merge the samples of several parallel sources (a list of lists) into this stat.

        Window stats take the newest values of all sources in turn (newest first, until
        the window is full), so each source keeps its share; an EMA takes the mean of all
        samples as one new value; sums add, min/max take the min/max of all samples.
        """
        sources = [s for s in sources if len(s)]
        if not sources:
            return
        method = self.reduce_method
        if method is None:
            for s in sources:
                self.values.extend(s)
        elif method == "mean" and self.window is not None:
            picked = []
            for i in range(1, max(len(s) for s in sources) + 1):
                for s in sources:
                    if i <= len(s):
                        picked.append(s[-i])
                if len(picked) >= self.window:
                    break
            self.values.extend(reversed(picked[: self.window]))
        else:
            flat = [v for s in sources for v in s]
            if method == "mean":
                self.push(sum(flat) / len(flat))
            elif method == "sum":
                self.push(sum(flat))
            else:
                self.push(min(flat) if method == "min" else max(flat))

    def copy(self) -> "Stats":
        """An independent copy (same settings and values)."""
        return copy.deepcopy(self)

    def __deepcopy__(self, memo: dict) -> "Stats":
        new = Stats.from_state(self.get_state())
        new._args = self._args
        return new

    def get_state(self) -> dict:
        """The settings and values as a JSON-safe dict."""
        return {
            "reduce": self.reduce_method,
            "window": self.window,
            "ema_coeff": self.ema_coeff,
            "clear_on_reduce": self.clear_on_reduce,
            "values": None if self.values is None else list(self.values),
            "acc": self.acc,
        }

    @classmethod
    def from_state(cls, state: dict) -> "Stats":
        """A Stats rebuilt from :meth:`get_state`'s dict."""
        stats = cls(state["reduce"], state["window"], state["ema_coeff"], state["clear_on_reduce"])
        if state.get("values") is not None:
            stats.values.extend(state["values"])
        stats.acc = state.get("acc")
        return stats

    def __repr__(self) -> str:
        return f"Stats({describe_settings(self.settings)}, value={self.peek()!r})"
