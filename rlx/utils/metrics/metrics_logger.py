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
in the logger they are merged into; or, as RLlib 2.60 does, with ``reduce="lifetime_sum"``
everywhere and ``MetricsLogger(root=True)`` for the logger that merges them.

RLlib 2.60's API is there too: ``aggregate()`` (the new name of ``merge_and_log_n_dicts``),
``log_time()`` (a ``with`` block), ``peek(compile=..., throughput=..., latest_merged_only=...)``,
``reduce()`` (Stats objects, for ``aggregate``; ``reduce(compile=True)`` gives plain values),
``peek_results`` and ``compile``. One difference, kept for rlx's callers and older RLlib code and
documented in docs/callbacks.md: ``reduce=None`` keeps the list of values (RLlib 2.60: an EMA;
its "item_series" is rlx's None).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Iterable, List, Optional, Union

from rlx.utils.errors import ConfigError, did_you_mean
from rlx.utils.metrics.stats import (DEFAULT_EMA_COEFF, REDUCE_METHODS, Stats, as_python_number, check_settings,
                                     describe_settings)

__all__ = ["DEFAULT_EMA_COEFF", "REDUCE_METHODS", "MetricsLogger", "Stats"]

Key = Union[str, tuple]


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


class MetricsLogger:
    """Logs values under (nested) keys and reduces them, like RLlib's ``MetricsLogger``.

    Keys are a str (top level) or a tuple of str: ``("a", "b")`` is the leaf "b" in the
    nested dict "a". A key is either a leaf or a branch, never both.
    """

    def __init__(self, root: bool = False) -> None:
        """Create an empty logger.

        ``root=True`` marks the logger that aggregates the results of all others (the
        Algorithm's): there, reduce="lifetime_sum" values survive ``reduce()``.
        """
        # Flat dict keyed by tuple keys: log_value stays one dict lookup and one append.
        self._stats: dict[tuple, Stats] = {}
        self._root = bool(root)

    @property
    def is_root(self) -> bool:
        """Whether this is a root logger (``MetricsLogger(root=True)``)."""
        return self._root

    @property
    def stats(self) -> dict:
        """The logged Stats objects as a nested dict (a new dict; the Stats are the live ones)."""
        return _nest(self._stats)

    # -- logging --------------------------------------------------------------------------

    def log_value(
        self,
        key: Key,
        value: Any,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
        *,
        with_throughput: bool = False,
        percentiles: Any = None,
    ) -> None:
        """Log one value under key.

        The reduce settings are fixed by the first call for a key; calling again with other
        settings raises ConfigError. ``reduce="mean"`` with neither window nor ema_coeff is an
        EMA with coefficient 0.01. RLlib 2.60's reduce names "ema", "lifetime_sum", "item"
        and "item_series" work too. ``with_throughput=True`` (sums only) tracks the rate
        that ``peek(key, throughput=True)`` returns. NumPy scalars and 0-d torch tensors are
        stored as Python numbers.
        """
        stat = self._stats.get(key if key.__class__ is tuple else (key,))
        if stat is None:
            if percentiles is not None:
                raise ConfigError("percentiles is not supported by rlx's MetricsLogger: log with reduce=None "
                                  "and window=N and compute np.percentile over the list in the result.")
            stat = self._new_stat(_to_key(key), reduce, window, ema_coeff, clear_on_reduce,
                                  with_throughput=with_throughput)
        elif stat._args != (reduce, window, ema_coeff, clear_on_reduce):
            self._check_same(key, stat, reduce, window, ema_coeff, clear_on_reduce)
        if hasattr(value, "item"):
            value = as_python_number(value)
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
        with_throughput: bool = False,
    ) -> None:
        """Log every leaf of a nested dict, under key (a prefix) when given.

        A leaf that is a Stats (from another logger's ``reduce()``) is merged in with its own
        settings, as :meth:`aggregate` does for one source.
        """
        prefix = () if key is None else _to_key(key)
        for sub_key, value in _flatten(stats_dict, prefix):
            if isinstance(value, Stats):
                self.merge_and_log_n_dicts([_nest({sub_key: value})])
                continue
            self.log_value(sub_key, value, reduce, window, ema_coeff, clear_on_reduce,
                           with_throughput=with_throughput)

    def log_time(
        self,
        key: Key,
        *,
        reduce: Optional[str] = "mean",
        window: Optional[int] = None,
        ema_coeff: Optional[float] = None,
        clear_on_reduce: bool = False,
    ) -> Stats:
        """The Stats under key, to use as ``with logger.log_time(key): ...``: the block's
        duration in seconds is logged under key on exit (an EMA of durations by default)."""
        k = _to_key(key)
        stat = self._stats.get(k)
        if stat is None:
            stat = self._new_stat(k, reduce, window, ema_coeff, clear_on_reduce)
        elif stat._args != (reduce, window, ema_coeff, clear_on_reduce):
            self._check_same(k, stat, reduce, window, ema_coeff, clear_on_reduce)
        return stat

    def aggregate(self, stats_dicts: List[dict], *, key: Optional[Key] = None) -> None:
        """Merge the results of n parallel loggers (their ``reduce()`` dicts) into this one.

        RLlib 2.60's name of :meth:`merge_and_log_n_dicts`: Stats leaves (from ``reduce()``,
        or an EnvRunner's ``get_metrics()``) bring their own settings; plain leaves (from
        ``reduce(compile=True)``) get the default settings (an EMA), a list leaf
        (reduce=None) is extended.
        """
        self.merge_and_log_n_dicts(stats_dicts, key=key)

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
                stat = self._new_stat(sub_key, *settings,
                                      with_throughput=first is not None and first.with_throughput)
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
                    sources.append([as_python_number(v) for v in leaf])
                else:
                    sources.append([as_python_number(leaf)])
            stat.merge(sources)

    # -- reading ----------------------------------------------------------------------------

    def peek(
        self,
        *key: Key,
        default: Any = None,
        compile: bool = True,
        throughput: bool = False,
        latest_merged_only: bool = False,
    ) -> Any:
        """The current reduced value under key, resetting nothing.

        ``peek("a", "b")`` and ``peek(("a", "b"))`` are the same (``peek(("a", "b"), 0)`` passes
        0 as the default, as in RLlib); a branch key gives a nested dict, no key the whole dict.
        A missing key returns default, or raises KeyError when default is None.
        ``compile=False`` gives each value as a list (a one-value list, or the list a
        reduce=None key holds); ``throughput=True`` the rate of a sum logged
        with_throughput=True; ``latest_merged_only=True`` the value of only what the latest
        ``aggregate()`` merged in.
        """
        if len(key) == 2 and not isinstance(key[1], (str, tuple)) and default is None:
            key, default = key[:1], key[1]  # RLlib's positional form: peek(("a", "b"), default)
        if throughput:
            read = Stats.throughput
        elif latest_merged_only:
            read = Stats.peek_latest_merged
        else:
            read = Stats.peek
        if not compile:
            plain = read

            def read(stat: Stats) -> Any:
                value = plain(stat)
                return value if isinstance(value, list) else [value]

        if not key:
            return _nest({k: read(s) for k, s in self._stats.items()})
        k = _join_key(key)
        stat = self._stats.get(k)
        if stat is not None:
            return read(stat)
        branch = self._branch(k)
        if branch:
            return _nest({sub[len(k):]: read(s) for sub, s in branch.items()})
        if default is not None:
            return default
        raise KeyError(self._missing(k))

    @staticmethod
    def peek_results(results: Any, compile: bool = True) -> Any:
        """``results`` (e.g. a ``reduce(compile=False)`` dict) with every Stats leaf replaced by
        its reduced value (a one-value list when compile=False); other leaves stay as they are."""
        if isinstance(results, Stats):
            value = results.peek()
            return value if compile or isinstance(value, list) else [value]
        if isinstance(results, dict):
            return {k: MetricsLogger.peek_results(v, compile) for k, v in results.items()}
        if isinstance(results, (list, tuple)):
            return type(results)(MetricsLogger.peek_results(v, compile) for v in results)
        return results

    def reduce(
        self,
        key: Optional[Key] = None,
        *,
        compile: bool = False,
        return_stats_objects: Optional[bool] = None,
    ) -> Any:
        """Reduce every stat (or those under key) and return the results as a nested dict.

        As in RLlib 2.60, the leaves are Stats objects by default (copies taken before
        clearing, with their settings, for another logger's :meth:`aggregate`; a Stats reads
        as a number: ``float(s)``, ``s == 1.5``, ``s.peek()``); ``compile=True`` gives plain
        values. Stats logged with clear_on_reduce=True (and non-root "lifetime_sum" ones)
        are cleared afterwards, and reduce=None stats without a window start a new list.
        ``return_stats_objects`` is rlx's older spelling of ``compile=False``.
        """
        if return_stats_objects is not None:
            compile = not return_stats_objects
        return_stats_objects = not compile
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

    def delete(self, *key: Key, key_error: bool = True) -> None:
        """Remove the stat under key (or every stat under a branch key); KeyError if none
        (nothing happens instead with ``key_error=False``)."""
        k = _join_key(key)
        if k in self._stats:
            del self._stats[k]
            return
        branch = self._branch(k)
        if not branch:
            if not key_error:
                return
            raise KeyError(self._missing(k))
        for sub_key in branch:
            del self._stats[sub_key]

    def reset(self) -> None:
        """Remove every stat."""
        self._stats = {}

    def compile(self) -> dict:
        """Reduce every stat to plain values (``reduce(compile=True)``) and add, for each sum
        logged with_throughput=True, its rate under "<key>_throughput"."""
        rates = {k[:-1] + (k[-1] + "_throughput",): s.throughput()
                 for k, s in self._stats.items() if s.with_throughput}
        reduced = self.reduce(compile=True)
        for k, rate in rates.items():
            node = reduced
            for part in k[:-1]:
                node = node.setdefault(part, {})
            node[k[-1]] = rate
        return reduced

    def get_state(self) -> dict:
        """Every stat's settings and values as a JSON-safe dict."""
        return {"stats": [{"key": list(k), **s.get_state()} for k, s in self._stats.items()]}

    def set_state(self, state: dict) -> None:
        """Replace all stats by those of :meth:`get_state`'s dict."""
        self._stats = {tuple(entry["key"]): Stats.from_state(entry) for entry in state["stats"]}

    def __repr__(self) -> str:
        return f"MetricsLogger({len(self._stats)} stats{', root' if self._root else ''})"

    # -- internals ----------------------------------------------------------------------------

    def _new_stat(self, key: tuple, reduce, window, ema_coeff, clear_on_reduce, *,
                  with_throughput: bool = False) -> Stats:
        stat = Stats(reduce, window, ema_coeff, clear_on_reduce, root=self._root, with_throughput=with_throughput)
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

    def _check_same(self, key, stat: Stats, reduce, window, ema_coeff, clear_on_reduce) -> None:
        wanted = check_settings(reduce, window, ema_coeff, clear_on_reduce, self._root)
        if wanted != stat.settings:
            raise ConfigError(
                f"metrics key {key!r} was first logged with {describe_settings(stat.settings)}; "
                f"it cannot now be logged with {describe_settings(wanted)}."
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
