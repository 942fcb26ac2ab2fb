"""`log_sys_usage`: the machine's CPU, RAM and GPU use in each result, under `perf`.

RLlib (through Ray Tune's UtilMonitor) reports `result["perf"]` with `cpu_util_percent` and
`ram_util_percent`, plus `gpu_util_percent<i>` and `vram_util_percent<i>` per GPU (fractions
in [0, 1], as GPUtil gives them). rlx reports the same keys without a sampling thread:

- `cpu_util_percent`: the machine's CPU use (0-100) over the whole iteration, from the CPU
  time counters at the end of the previous result and at this one;
- `ram_util_percent`: the share of memory in use (0-100) when the result is made;
- `gpu_util_percent<i>` / `vram_util_percent<i>`: each GPU's load and memory use (0-1), read
  through NVML (the nvidia-ml-py package, GPUtil's source of the same numbers) when it is
  installed, else for the current CUDA device of a process that already uses CUDA.

psutil (a dependency of rlx, as of Ray) does the CPU and RAM readings.
"""
from __future__ import annotations

import logging
import sys
from typing import Any

from rlx.utils.errors import ConfigError

logger = logging.getLogger("rlx")

__all__ = ["SysUsageMonitor", "import_psutil", "sys_usage_monitor"]


def import_psutil() -> Any:
    """The psutil module (a dependency of rlx), or None where it is not installed."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def _busy_and_total(times: Any) -> tuple[float, float]:
    """(busy, total) CPU seconds of a psutil cpu_times() reading, counted as psutil.cpu_percent does."""
    total = sum(times)
    # Linux counts guest time inside user and nice time.
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


class SysUsageMonitor:
    """Reads the machine's CPU, RAM and GPU use for one result at a time (`read()`).

    Args:
        psutil: the psutil module (see import_psutil).
    """

    def __init__(self, psutil: Any):
        self._psutil = psutil
        self._last = _busy_and_total(psutil.cpu_times())
        self._nvml = _init_nvml()

    def read(self) -> dict[str, float]:
        """`result["perf"]`: CPU use since the previous read (or since the monitor was made), RAM use
        now, and the use of each GPU that can be read."""
        busy, total = _busy_and_total(self._psutil.cpu_times())
        last_busy, last_total = self._last
        self._last = (busy, total)
        elapsed = total - last_total
        cpu = 0.0 if elapsed <= 0 else min(100.0, max(0.0, 100.0 * (busy - last_busy) / elapsed))
        out = {"cpu_util_percent": round(cpu, 2),
               "ram_util_percent": float(self._psutil.virtual_memory().percent)}
        out.update(self._gpu_usage())
        return out

    def _gpu_usage(self) -> dict[str, float]:
        if self._nvml is not None:
            return _nvml_usage(self._nvml)
        return _torch_cuda_usage()


def _init_nvml() -> Any:
    """The initialised pynvml module (nvidia-ml-py), or None without it or without an NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - not installed, or no driver: no GPU readings through NVML
        return None
    return pynvml


def _nvml_usage(nvml: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            out[f"gpu_util_percent{i}"] = nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0
            out[f"vram_util_percent{i}"] = memory.used / memory.total if memory.total else 0.0
    except Exception as err:  # noqa: BLE001 - a GPU that cannot be read is left out of the result
        logger.debug("log_sys_usage: NVML could not read the GPUs (%s: %s).", type(err).__name__, err)
    return out


def _torch_cuda_usage() -> dict[str, float]:
    """The current CUDA device's use, only in a process that already uses CUDA (reading it must
    not create a CUDA context)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return {}
    out: dict[str, float] = {}
    i = torch.cuda.current_device()
    try:
        free, total = torch.cuda.mem_get_info(i)
        out[f"vram_util_percent{i}"] = (total - free) / total if total else 0.0
    except Exception:  # noqa: BLE001 - left out when it cannot be read
        pass
    return out


def sys_usage_monitor(config: Any) -> SysUsageMonitor | None:
    """The monitor an Algorithm with this config reports `perf` with; None when log_sys_usage is
    off, or psutil is missing and the user left log_sys_usage at its default (True). A user who
    set log_sys_usage=True without psutil gets a ConfigError that says how to install it."""
    if not config.log_sys_usage:
        return None
    psutil = import_psutil()
    if psutil is None:
        is_user_set = getattr(config, "is_user_set", None)
        if is_user_set is not None and is_user_set("log_sys_usage"):
            raise ConfigError("log_sys_usage=True reads CPU and RAM use with psutil, which is not installed: "
                              "pip install psutil (Ray ships a copy rlx also finds), or set "
                              "config.debugging(log_sys_usage=False).")
        logger.info("log_sys_usage: psutil is not installed, so results carry no 'perf' section.")
        return None
    return SysUsageMonitor(psutil)
