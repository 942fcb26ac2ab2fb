"""Keep freed memory in the process instead of handing it back to the OS after every update.

A CPU update of SAC's default [256, 256] networks on 256 rows allocates and frees activations
and gradients of 256 KB to 512 KB dozens of times. glibc's malloc returns such memory to the OS
as soon as the top of its heap holds more than about 1 MB free (its dynamic trim threshold), so
the next update takes the pages back one fault at a time: about 300 page faults per SAC update,
measured on a 2-core machine, and 10-20% of the update's time. Raising the trim and mmap
thresholds once (glibc's `mallopt`) keeps those pages in the heap: no faults after the first
updates, at the price of keeping up to `TRIM_THRESHOLD` bytes of freed memory in the process.

It applies only on Linux with glibc, when the user has not set glibc's own MALLOC_TRIM_THRESHOLD_ /
MALLOC_MMAP_THRESHOLD_ environment variables, and not when RLX_KEEP_FREED_MEMORY=0.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

#: Allocations from this size up get their own mmap (and go back to the OS when freed).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Freed memory at the top of the heap beyond this size goes back to the OS.
TRIM_THRESHOLD = 128 * 1024 * 1024

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Raise glibc's trim and mmap thresholds once per process (see the module doc); return
    whether they are raised."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if not sys.platform.startswith("linux") or os.environ.get("RLX_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt thresholds)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _applied
