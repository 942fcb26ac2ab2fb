"""RLlib's episode indexing rules (negative indices, `fill` padding, lookback) over a list of items."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np


def _filled_like(item: Any, fill: Any) -> Any:
    if isinstance(item, dict):
        return {k: _filled_like(v, fill) for k, v in item.items()}
    if isinstance(item, tuple):
        return tuple(_filled_like(v, fill) for v in item)
    if isinstance(item, np.ndarray):
        return np.full_like(item, fill)
    return type(item)(fill) if isinstance(item, (int, float, np.number)) and fill is not None else fill


def select_items(items: Sequence[Any], indices: Any, what: str, fill: Any = None, has_fill: bool = False,
                 neg_index_as_lookback: bool = False) -> Any:
    """Items by RLlib's rules: None -> all (list), int -> one item, list of ints or slice -> list.

    With `fill`, positions outside the items give a fill value shaped like the items (instead of
    an IndexError for ints, or fewer items for slices). With neg_index_as_lookback, negative
    indices mean positions before the first item (always filled) instead of counting from the end.
    """
    n = len(items)
    if indices is None:
        return list(items)
    if isinstance(indices, slice):
        if not has_fill and not neg_index_as_lookback:
            return list(items[indices])
        start, stop, step = indices.start, indices.stop, indices.step or 1
        if neg_index_as_lookback:
            start = 0 if start is None else start
            stop = n if stop is None else stop
        else:
            start = 0 if start is None else (start + n if start < 0 else start)
            stop = n if stop is None else (stop + n if stop < 0 else stop)
        return [_item_at(items, i, what, fill, True) for i in range(start, stop, step)]
    if isinstance(indices, (list, tuple)):
        return [select_items(items, i, what, fill, has_fill, neg_index_as_lookback) for i in indices]
    try:
        i = operator.index(indices)
    except TypeError:
        raise TypeError(f"{what} indices must be None, an int, a list of ints or a slice, got {indices!r}.") from None
    if neg_index_as_lookback and i < 0:
        return _item_at(items, i, what, fill, True)
    if i < 0:
        i += n
    return _item_at(items, i, what, fill, has_fill)


def _item_at(items: Sequence[Any], i: int, what: str, fill: Any, has_fill: bool) -> Any:
    if 0 <= i < len(items):
        return items[i]
    if has_fill:
        if not len(items):
            return fill
        return _filled_like(items[0] if items[0] is not None else items[-1], fill)
    raise IndexError(f"{what} index {i} out of range: the episode has {len(items)} {what}.")
