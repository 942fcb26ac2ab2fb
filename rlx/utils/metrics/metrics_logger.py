"""RLlib's ``MetricsLogger``: log values under (nested) keys and reduce them to results.

Each key holds one :class:`Stats` object that knows how to reduce the values logged under
it ("mean", "min", "max", "sum" or None = keep them all), over a sliding window or, for
"mean" without a window, as an exponential moving average (EMA).

Merging the results of several loggers (e.g. one per EnvRunner) with
:meth:`MetricsLogger.merge_and_log_n_dicts` takes either

* plain reduced dicts, from ``reduce()``: every leaf counts as one sample (a list leaf,
  the result of ``reduce=None``, as its elements), or
* dicts of :class:`Stats` objects, from ``reduce(return_stats_objects=True)``: these carry
  the raw window values, so window means are pooled over all the values of all loggers
  (A logged [1, 2], B logged [3] -> 2.0, where the plain means would give 2.25).

Sums add up, min/max take the min/max over all sources. Lifetime counters should be logged
with ``reduce="sum", clear_on_reduce=True`` in the source loggers, so that every merge adds
only what was counted since their last ``reduce()``, and with ``reduce="sum"`` (no clear)
in the logger they are merged into.
"""
from __future__ import annotations

import copy
import math
from collections import deque
from typing import Any, Iterable, Optional, Union

from rlx.utils.errors import ConfigError, did_you_mean

#: RLlib's default EMA coefficient for reduce="mean" with neither window nor ema_coeff.
DEFAULT_EMA_COEFF = 0.01

REDUCE_METHODS = ("mean", "min", "max", "sum", None)

Key = Union[str, tuple]


def _check_settings(
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


def _describe(settings: tuple) -> str:
    reduce, window, ema_coeff, clear = settings
    return f"reduce={reduce!r}, window={window!r}, ema_coeff={ema_coeff!r}, clear_on_reduce={clear!r}"


def _to_key(key: Any) -> tuple:
    """A str or a non-empty tuple of str as a tuple key."""
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple) and key and all(isinstance(k, str) for k in key):
        return key
    raise TypeError(f"a metrics key is a str or a non-empty tuple of str, got {key!r}.")


def _join_key(key: tuple) -> tuple:
    """``*key`` args as one tuple key: peek("a", "b") == peek(("a", "b"))."""
    if len(key) == 1:
        return _to_key(key[0])
    if not key:
        raise TypeError("a metrics key is required.")
    return _to_key(tuple(key))


def _item(value: Any) -> Any:
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
        self.reduce_method, self.window, self.ema_coeff, self.clear_on_reduce = _check_settings(
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
        return f"Stats({_describe(self.settings)}, value={self.peek()!r})"


class MetricsLogger:
    """Logs values under (nested) keys and reduces them, like RLlib's ``MetricsLogger``.

    Keys are a str (top level) or a tuple of str: ``("a", "b")`` is the leaf "b" in the
    nested dict "a". A key is either a leaf or a branch, never both.
    """

    def __init__(self) -> None:
        """Create an empty logger."""
        # Flat dict keyed by tuple keys: log_value stays one dict lookup and one append.
        self._stats: dict[tuple, Stats] = {}

    # -- logging --------------------------------------------------------------------------

    def log_value(
        self,
        key: Key,
        value: Any,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Log one value under key.

        The reduce settings are fixed by the first call for a key; calling again with other
        settings raises ConfigError. ``reduce="mean"`` with neither window nor ema_coeff is an
        EMA with coefficient 0.01. NumPy scalars and 0-d torch tensors are stored as Python
        numbers.
        """
        stat = self._stats.get(key if key.__class__ is tuple else (key,))
        if stat is None:
            stat = self._new_stat(_to_key(key), reduce, window, ema_coeff, clear_on_reduce)
        elif stat._args != (reduce, window, ema_coeff, clear_on_reduce):
            self._check_same(key, stat, reduce, window, ema_coeff, clear_on_reduce)
        if hasattr(value, "item"):
            value = _item(value)
        stat.push(value)

    def log_dict(
        self,
        stats_dict: dict,
        *,
        key: Optional[Key] = None,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Log every leaf of a nested dict, under key (a prefix) when given."""
        prefix = () if key is None else _to_key(key)
        for sub_key, value in _flatten(stats_dict, prefix):
            self.log_value(sub_key, value, reduce, window, ema_coeff, clear_on_reduce)

    def merge_and_log_n_dicts(
        self,
        stats_dicts: list,
        *,
        key: Optional[Key] = None,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Merge the results of several parallel loggers into this one, under key if given.

        Each dict is a ``reduce()`` result (every leaf one sample; a list leaf, its
        elements) or a ``reduce(return_stats_objects=True)`` result (leaves are Stats,
        whose raw window values are pooled, so window means are exact). New keys get the
        settings of their Stats leaves, or the settings given here for plain values;
        plain values merged into an existing key must use that key's settings. A Stats
        leaf must have the same reduce method as the key it is merged into.
        """
        prefix = () if key is None else _to_key(key)
        per_key: dict[tuple, list] = {}
        for stats_dict in stats_dicts:
            for sub_key, leaf in _flatten(stats_dict, prefix):
                per_key.setdefault(sub_key, []).append(leaf)
        for sub_key, leaves in per_key.items():
            # Stats leaves carry the settings they were logged with; those win over the
            # arguments, so a metric keeps its window/reduce from the EnvRunner to the result.
            first = next((leaf for leaf in leaves if isinstance(leaf, Stats)), None)
            settings = first._args if first is not None else (reduce, window, ema_coeff, clear_on_reduce)
            stat = self._stats.get(sub_key)
            if stat is None:
                stat = self._new_stat(sub_key, *settings)
            elif first is None:
                self._check_same(sub_key, stat, *settings)
            sources = []
            for leaf in leaves:
                if isinstance(leaf, Stats):
                    if leaf.reduce_method != stat.reduce_method:
                        raise ConfigError(
                            f"cannot merge a Stats with reduce={leaf.reduce_method!r} into key "
                            f"{sub_key!r}, which has reduce={stat.reduce_method!r}."
                        )
                    sources.append(leaf.samples())
                elif isinstance(leaf, (list, tuple, deque)):
                    sources.append([_item(v) for v in leaf])
                else:
                    sources.append([_item(leaf)])
            stat.merge(sources)

    # -- reading ----------------------------------------------------------------------------

    def peek(self, *key: Key, default: Any = None) -> Any:
        """The current reduced value under key, resetting nothing.

        ``peek("a", "b")`` and ``peek(("a", "b"))`` are the same; a branch key gives a nested
        dict. A missing key returns default, or raises KeyError when default is None.
        """
        k = _join_key(key)
        stat = self._stats.get(k)
        if stat is not None:
            return stat.peek()
        branch = self._branch(k)
        if branch:
            return _nest({sub[len(k):]: s.peek() for sub, s in branch.items()})
        if default is not None:
            return default
        raise KeyError(self._missing(k))

    def reduce(self, key: Optional[Key] = None, *, return_stats_objects: bool = False) -> Any:
        """Reduce every stat (or those under key) and return the results as a nested dict.

        Stats logged with clear_on_reduce=True are cleared afterwards (and reduce=None
        stats without a window start a new list). With ``return_stats_objects=True`` the
        leaves are copies of the Stats, taken before clearing, for
        :meth:`merge_and_log_n_dicts`; its reduced values are ``stat.peek()``.
        """
        if key is None:
            selected = self._stats
            prefix_len = 0
        else:
            k = _to_key(key)
            if k in self._stats:
                stat = self._stats[k]
                if return_stats_objects:
                    snapshot = stat.copy()
                    stat.reduce()
                    return snapshot
                return stat.reduce()
            selected = self._branch(k)
            if not selected:
                raise KeyError(self._missing(k))
            prefix_len = len(k)
        flat = {}
        for sub_key, stat in selected.items():
            if return_stats_objects:
                flat[sub_key[prefix_len:]] = stat.copy()
                stat.reduce()
            else:
                flat[sub_key[prefix_len:]] = stat.reduce()
        return _nest(flat)

    def __contains__(self, key: Key) -> bool:
        """Whether key (str or tuple) is a logged leaf or a branch of logged leaves."""
        k = _to_key(key)
        return k in self._stats or bool(self._branch(k))

    # -- removing and state ---------------------------------------------------------------

    def delete(self, *key: Key) -> None:
        """Remove the stat under key (or every stat under a branch key); KeyError if none."""
        k = _join_key(key)
        if k in self._stats:
            del self._stats[k]
            return
        branch = self._branch(k)
        if not branch:
            raise KeyError(self._missing(k))
        for sub_key in branch:
            del self._stats[sub_key]

    def reset(self) -> None:
        """Remove every stat."""
        self._stats = {}

    def get_state(self) -> dict:
        """Every stat's settings and values as a JSON-safe dict."""
        return {"stats": [{"key": list(k), **s.get_state()} for k, s in self._stats.items()]}

    def set_state(self, state: dict) -> None:
        """Replace all stats by those of :meth:`get_state`'s dict."""
        self._stats = {tuple(entry["key"]): Stats.from_state(entry) for entry in state["stats"]}

    def __repr__(self) -> str:
        return f"MetricsLogger({len(self._stats)} stats)"

    # -- internals ----------------------------------------------------------------------------

    def _new_stat(self, key: tuple, reduce, window, ema_coeff, clear_on_reduce) -> Stats:
        stat = Stats(reduce, window, ema_coeff, clear_on_reduce)
        n = len(key)
        for existing in self._stats:
            m = len(existing)
            if (m < n and key[:m] == existing) or (m > n and existing[:n] == key):
                raise ConfigError(
                    f"metrics key {key!r} clashes with {existing!r}: a key is either a value "
                    "or a nested dict of values, not both."
                )
        self._stats[key] = stat
        return stat

    @staticmethod
    def _check_same(key, stat: Stats, reduce, window, ema_coeff, clear_on_reduce) -> None:
        wanted = _check_settings(reduce, window, ema_coeff, clear_on_reduce)
        if wanted != stat.settings:
            raise ConfigError(
                f"metrics key {key!r} was first logged with {_describe(stat.settings)}; "
                f"it cannot now be logged with {_describe(wanted)}."
            )

    def _branch(self, prefix: tuple) -> dict:
        n = len(prefix)
        return {k: s for k, s in self._stats.items() if len(k) > n and k[:n] == prefix}

    def _missing(self, key: tuple) -> str:
        names = ["/".join(k) for k in self._stats]
        return f"no metrics logged under {key!r}." + did_you_mean("/".join(key), names)


def _flatten(stats_dict: dict, prefix: tuple) -> Iterable[tuple]:
    """(tuple key, leaf) pairs of a nested dict; a Stats or any non-dict is a leaf."""
    for name, value in stats_dict.items():
        sub_key = prefix + (name,)
        if isinstance(value, dict):
            yield from _flatten(value, sub_key)
        else:
            yield sub_key, value


def _nest(flat: dict) -> dict:
    """A nested dict from a dict keyed by tuples."""
    out: dict = {}
    for key, value in flat.items():
        node = out
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = value
    return out
