"""RLlib's ``Stats``: the values logged under one MetricsLogger key and how to reduce them.

A Stats reduces its values with "mean", "min", "max", "sum" or None (keep them all), over a
sliding window or, for "mean" without a window, as an exponential moving average (EMA); it
merges the Stats of several loggers (rlx.utils.metrics.metrics_logger) and checkpoints its state.

RLlib 2.60's reduce names are accepted too: "ema" (= "mean" with an EMA coefficient, 0.01 by
default), "item_series" (= None), "item" (only the latest value is kept; a merge replaces it) and
"lifetime_sum" (a sum that a root logger keeps and any other logger clears on each reduce, so
the root adds up what every source counted since its last reduce).
"""
from __future__ import annotations

import copy
import math
import threading
import time
from collections import deque
from typing import Any, Optional, Union

from rlx.utils.errors import ConfigError, did_you_mean

#: RLlib's default EMA coefficient for reduce="mean" with neither window nor ema_coeff.
DEFAULT_EMA_COEFF = 0.01

REDUCE_METHODS = ("mean", "min", "max", "sum", "item", None)

#: RLlib 2.60's reduce names, beside REDUCE_METHODS.
RLLIB_REDUCE_NAMES = ("ema", "lifetime_sum", "item_series")


def check_settings(
    reduce: Optional[str],
    window: Optional[int],
    ema_coeff: Optional[float],
    clear_on_reduce: bool,
    root: bool = False,
) -> tuple:
    """Validate reduce settings and return them normalised (the default EMA filled in).

    RLlib 2.60's names map onto rlx's: "ema" is "mean" with an EMA coefficient, "item_series"
    is None, and "lifetime_sum" is a "sum" that only a root logger (``root=True``) keeps over
    reduces.
    """
    if reduce == "item_series":  # RLlib's newer name of reduce=None: keep the values as they are
        reduce = None
    elif reduce == "ema":
        if window is not None:
            raise ConfigError(f"reduce='ema' takes no window (got window={window!r}): use reduce='mean' "
                              "with window=N for a mean of the last N values.")
        reduce, ema_coeff = "mean", DEFAULT_EMA_COEFF if ema_coeff is None else ema_coeff
    elif reduce == "lifetime_sum":
        if window is not None:
            raise ConfigError(f"reduce='lifetime_sum' takes no window (got window={window!r}): a lifetime "
                              "sum counts every value; use reduce='sum' with window=N for a windowed sum.")
        reduce, clear_on_reduce = "sum", not root
    elif reduce == "percentiles":
        raise ConfigError("reduce='percentiles' is not supported by rlx's MetricsLogger: log the values with "
                          "reduce=None and window=N and compute np.percentile over the list in the result.")
    if reduce not in REDUCE_METHODS:
        names = [m for m in REDUCE_METHODS if m is not None] + list(RLLIB_REDUCE_NAMES)
        raise ConfigError(
            f"unknown reduce={reduce!r}; accepted: 'mean', 'min', 'max', 'sum' or None, and RLlib 2.60's "
            f"'ema', 'lifetime_sum', 'item' and 'item_series'."
            + (did_you_mean(reduce, names) if isinstance(reduce, str) else "")
        )
    if reduce == "item" and window is not None:
        raise ConfigError(f"reduce='item' keeps only the latest value and takes no window (got window={window!r}).")
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
    ``reduce=None``, and one running value (EMA, sum, min, max or the latest item) otherwise.

    Like RLlib's Stats, a Stats is a context manager that logs the seconds spent in its
    ``with`` block (what ``MetricsLogger.log_time`` returns), and it converts to a number
    (``float(stats)``, comparisons, arithmetic) through its reduced value.
    """

    __slots__ = ("reduce_method", "window", "ema_coeff", "clear_on_reduce", "values", "acc", "push", "_args",
                 "with_throughput", "latest_merged", "_starts", "_throughput_ref", "_ema_pool")

    def __init__(
        self,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
        *,
        root: bool = False,
        with_throughput: bool = False,
    ):
        """Create an empty Stats; raises ConfigError for invalid settings.

        ``root``: whether the Stats lives in a root logger (decides what reduce="lifetime_sum"
        does); ``with_throughput``: track the rate of change of a "sum" (see :meth:`throughput`).
        """
        self._args = (reduce, window, ema_coeff, clear_on_reduce)
        self.reduce_method, self.window, self.ema_coeff, self.clear_on_reduce = check_settings(
            reduce, window, ema_coeff, clear_on_reduce, root
        )
        if with_throughput and self.reduce_method != "sum":
            raise ConfigError(f"with_throughput=True tracks the rate of a sum: it needs reduce='sum' or "
                              f"'lifetime_sum', got reduce={reduce!r}.")
        self.with_throughput = bool(with_throughput)
        self.latest_merged: Optional[list] = None
        self._ema_pool: list = []  # EMA values merged in since the last reduce
        self._starts: Optional[dict] = None
        self._throughput_ref = (time.perf_counter(), 0) if with_throughput else None
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
                "item": self._push_item,
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

    def _push_item(self, value: Any) -> None:
        self.acc = value

    def peek(self) -> Any:
        """The reduced value, without changing anything.

        An empty stat peeks as nan ("mean", "min", "max"), 0 ("sum"), [] (None) or None ("item").
        """
        if self.values is None:
            if self.acc is None:
                if self.reduce_method == "item":
                    return None
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
        self._ema_pool = []
        if self.clear_on_reduce or (self.reduce_method is None and self.window is None) or self.reduce_method == "item":
            self.clear()
        if self._throughput_ref is not None:
            self._throughput_ref = (time.perf_counter(), self.peek())
        return value

    def throughput(self) -> float:
        """Units per second added to this sum since the last reduce (or since creation).

        Only for Stats created with ``with_throughput=True``.
        """
        if self._throughput_ref is None:
            raise ConfigError("this metric does not track a throughput: log it with reduce='sum' (or "
                              "'lifetime_sum') and with_throughput=True.")
        since, value_then = self._throughput_ref
        elapsed = time.perf_counter() - since
        return (self.peek() - value_then) / elapsed if elapsed > 0 else 0.0

    def peek_latest_merged(self) -> Any:
        """The reduced value of what the latest :meth:`merge` brought in (nan/0/[] if none yet)."""
        latest = Stats(*self.settings)
        if self.latest_merged:
            latest.merge(self.latest_merged)
        return latest.peek()

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
        the window is full), so each source keeps its share; an EMA becomes the mean of the
        sources' values merged since the last reduce (as in RLlib 2.60); sums add, min/max
        take the min/max of all samples.
        """
        sources = [s for s in sources if len(s)]
        if not sources:
            return
        self.latest_merged = [list(s) for s in sources]
        method = self.reduce_method
        if method == "item":
            self.acc = sources[-1][-1]
        elif method is None:
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
                # As RLlib 2.60: the mean of the sources' EMAs merged in since the last reduce
                # (the sources smooth already; smoothing again would lag behind them).
                self._ema_pool.extend(flat)
                self.acc = sum(self._ema_pool) / len(self._ema_pool)
            elif method == "sum":
                self.push(sum(flat))
            else:
                self.push(min(flat) if method == "min" else max(flat))

    def copy(self) -> "Stats":
        """An independent copy (same settings and values)."""
        return copy.deepcopy(self)

    def __deepcopy__(self, memo: dict) -> "Stats":
        return Stats.from_state(self.get_state())

    def get_state(self) -> dict:
        """The settings and values as a JSON-safe dict."""
        return {
            "reduce": self.reduce_method,
            "window": self.window,
            "ema_coeff": self.ema_coeff,
            "clear_on_reduce": self.clear_on_reduce,
            "values": None if self.values is None else list(self.values),
            "acc": self.acc,
            "args": list(self._args),
            "with_throughput": self.with_throughput,
        }

    @classmethod
    def from_state(cls, state: dict) -> "Stats":
        """A Stats rebuilt from :meth:`get_state`'s dict."""
        stats = cls(state["reduce"], state["window"], state["ema_coeff"], state["clear_on_reduce"],
                    with_throughput=state.get("with_throughput", False))
        if state.get("values") is not None:
            stats.values.extend(state["values"])
        stats.acc = state.get("acc")
        if state.get("args") is not None:
            stats._args = tuple(state["args"])
        return stats

    # -- a `with` block logs its duration (MetricsLogger.log_time) ----------------------------

    def __enter__(self) -> "Stats":
        if self._starts is None:
            self._starts = {}
        self._starts[threading.get_ident()] = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, tb: Any) -> None:
        start = self._starts.pop(threading.get_ident())
        self.push(time.perf_counter() - start)

    # -- a Stats reads as its reduced value (as RLlib's do) ------------------------------------

    def __float__(self) -> float:
        value = self.peek()
        if isinstance(value, (list, tuple, deque)):
            raise ValueError(f"{self!r} holds a list of values (reduce=None), not one number.")
        return float(value)

    def __int__(self) -> int:
        return int(float(self))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Stats):
            other = other.peek()
        return self.peek() == other

    __hash__ = object.__hash__

    def __lt__(self, other: Any) -> bool:
        return float(self) < float(other)

    def __le__(self, other: Any) -> bool:
        return float(self) <= float(other)

    def __gt__(self, other: Any) -> bool:
        return float(self) > float(other)

    def __ge__(self, other: Any) -> bool:
        return float(self) >= float(other)

    def __add__(self, other: Any) -> float:
        return float(self) + float(other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> float:
        return float(self) - float(other)

    def __rsub__(self, other: Any) -> float:
        return float(other) - float(self)

    def __mul__(self, other: Any) -> float:
        return float(self) * float(other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> float:
        return float(self) / float(other)

    def __format__(self, spec: str) -> str:
        return format(self.peek(), spec)

    def __repr__(self) -> str:
        return f"Stats({describe_settings(self.settings)}, value={self.peek()!r})"
