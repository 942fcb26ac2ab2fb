"""OutputWriter: where sampled experiences go (`ray.rllib.offline.output_writer`)."""
from __future__ import annotations

from typing import Any


class OutputWriter:
    """Saves batches of experiences. Give a callable `fn(ioctx) -> OutputWriter` as `output`
    to write them your own way."""

    def write(self, sample_batch: Any) -> None:
        """Save one batch (a SampleBatch or a MultiAgentBatch)."""
        raise TypeError(f"{type(self).__name__} must implement write(sample_batch).")

    def close(self) -> None:
        """Finish writing (flush and close files); the Algorithm calls it when it stops."""


class NoopOutput(OutputWriter):
    """An OutputWriter that discards every batch."""

    def write(self, sample_batch: Any) -> None:
        """Discard `sample_batch`."""
