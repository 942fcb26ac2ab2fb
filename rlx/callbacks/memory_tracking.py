"""MemoryTrackingCallbacks: the memory of each EnvRunner process, per episode, as custom metrics.

RLlib's debugging callback (`from ray.rllib.algorithms.callbacks import MemoryTrackingCallbacks`):
it starts `tracemalloc` when it is created (in every EnvRunner process), and at each episode's
end records in `episode.custom_metrics`

- `tracemalloc/<file>:<line>/size` (KiB) and `.../count` for the ten source lines that hold
  the most Python allocations (from a snapshot at most SNAPSHOT_INTERVAL_S seconds old: a
  snapshot takes about half a second in a process holding torch), and
- `tracemalloc/worker/rss`, `tracemalloc/worker/vms` (and, on Linux, `tracemalloc/worker/data`)
  in bytes: the process's resident, virtual and data memory,

which the results report as `result["custom_metrics"]["tracemalloc/worker/rss_mean"]`, ...
Tracing every allocation slows the process down; use it to find a leak, not in production.
"""
from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
from typing import Any

from rlx.callbacks.callbacks import RLlibCallback

__all__ = ["MemoryTrackingCallbacks", "process_memory"]

#: Source lines reported per episode (those holding the most memory).
TOP_LINES = 10
#: Frames tracemalloc keeps per allocation: the report groups by the allocating line only, and
#: one frame makes a snapshot's statistics about 4x faster than RLlib's 10.
TRACE_FRAMES = 1
#: A snapshot (with a full garbage collection first) costs about half a second in a process
#: holding torch; episodes ending sooner after one report its top lines again.
SNAPSHOT_INTERVAL_S = 2.0


def process_memory() -> dict[str, int]:
    """This process's memory in bytes: {"rss", "vms"} and, on Linux, "data" (psutil when it is
    installed, else /proc/self/statm, else the peak RSS from `resource`)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        info = psutil.Process(os.getpid()).memory_info()
        out = {"rss": int(info.rss), "vms": int(info.vms)}
        if sys.platform.startswith("linux"):
            out["data"] = int(info.data)
        return out
    try:
        with open("/proc/self/statm") as f:
            # size resident shared text lib data dt, in pages
            fields = [int(x) for x in f.read().split()]
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
        return {"rss": int(peak) * scale, "vms": int(peak) * scale}
    page = os.sysconf("SC_PAGE_SIZE")
    return {"rss": fields[1] * page, "vms": fields[0] * page, "data": fields[5] * page}


class MemoryTrackingCallbacks(RLlibCallback):
    """Log the EnvRunner process's memory and its top allocating source lines at every
    episode end (`episode.custom_metrics["tracemalloc/..."]`). For debugging: tracemalloc
    slows everything it traces."""

    def __init__(self) -> None:
        super().__init__()
        if not tracemalloc.is_tracing():
            tracemalloc.start(TRACE_FRAMES)
        self._top: dict[str, float] = {}
        self._top_taken_at = -float("inf")

    def _top_lines(self) -> dict[str, float]:
        """{"tracemalloc/<file>:<line>/size" (KiB) and ".../count": value} for the lines holding the
        most memory, from a snapshot at most SNAPSHOT_INTERVAL_S old."""
        now = time.monotonic()
        if now - self._top_taken_at >= SNAPSHOT_INTERVAL_S:
            gc.collect()
            top = tracemalloc.take_snapshot().statistics("lineno")[:TOP_LINES]
            self._top = {}
            for stat in top:
                trace = str(stat.traceback)
                self._top[f"tracemalloc/{trace}/size"] = stat.size / 1024
                self._top[f"tracemalloc/{trace}/count"] = stat.count
            self._top_taken_at = time.monotonic()
        return self._top

    def on_episode_end(self, *, episode: Any, **kwargs: Any) -> None:
        """Record the top allocations and the process memory in `episode.custom_metrics`."""
        episode.custom_metrics.update(self._top_lines())
        for key, value in process_memory().items():
            episode.custom_metrics[f"tracemalloc/worker/{key}"] = value
