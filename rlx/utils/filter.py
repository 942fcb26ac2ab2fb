"""RLlib's `ray.rllib.utils.filter` path: the observation filters (defined in rlx.utils.filters)
and `get_filter`, which builds one from an `observation_filter` setting."""
from __future__ import annotations

from typing import Any, Callable, Union

from rlx.utils.filters import MeanStdFilter, NoFilter

__all__ = ["ConcurrentMeanStdFilter", "MeanStdFilter", "NoFilter", "get_filter"]

#: RLlib's thread-safe variant; rlx's runners apply a filter from one thread, so it is the same class.
ConcurrentMeanStdFilter = MeanStdFilter


def get_filter(filter_config: Union[str, Callable[[tuple], Any]], shape: tuple) -> Any:
    """The filter an `observation_filter` setting names: "NoFilter", "MeanStdFilter" (or
    "ConcurrentMeanStdFilter"), both unclipped as in RLlib, or a callable taking the shape."""
    if filter_config == "NoFilter":
        return NoFilter(tuple(shape))
    if filter_config in ("MeanStdFilter", "ConcurrentMeanStdFilter"):
        return MeanStdFilter(tuple(shape), clip=None)
    if callable(filter_config):
        return filter_config(shape)
    raise ValueError(f"Unknown observation_filter {filter_config!r}: use 'NoFilter', 'MeanStdFilter', "
                     "'ConcurrentMeanStdFilter' or a callable that takes the observation shape.")
