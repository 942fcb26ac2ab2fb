"""MixedInput: each batch from one of several sources, drawn by probability (`ray.rllib.offline.mixed_input`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.options import check_distribution
from rlx.offline.sources import reader_for_source


class MixedInput(InputReader):
    """Reads each batch from a source drawn with the given probabilities.

    Args:
        dist: {source: probability}; a source is "sampler" (the envs), a path or glob of
            offline files (JSON lines, or Parquet for *.parquet files and
            `input_config={"format": "parquet"}`), or a callable `fn(ioctx) -> InputReader`.
            The probabilities must sum to 1.
        ioctx: the IOContext the sources are built with.

    Example:
        >>> MixedInput({"sampler": 0.4, "/tmp/experiences/*.json": 0.6}, ioctx)  # doctest: +SKIP
    """

    def __init__(self, dist: dict[Any, float], ioctx: IOContext):
        check_distribution("input_", dist)
        self.choices = [reader_for_source(source, ioctx) for source in dist]
        self.p = [float(p) for p in dist.values()]
        seed = ioctx.config.get("seed") if hasattr(ioctx.config, "get") else None
        self._rng = np.random.default_rng(None if seed is None else int(seed) + 101)

    def next(self) -> Any:
        """The next batch of a source drawn by probability."""
        source = self.choices[int(self._rng.choice(len(self.choices), p=self.p))]
        return source.next()
