"""`get_global_worker()`: the EnvRunner (old name: RolloutWorker) of the calling process.

Callbacks use it to reach the runner they run in. Inside `EnvRunner.sample()` it is that
runner (also for evaluation runners driven by their own threads); elsewhere it is the
training EnvRunner created in this process.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

_acting = threading.local()
_process_runner: Any = None


def get_global_worker() -> Any:
    """The EnvRunner running in this process (or thread), or None when there is none."""
    runner = getattr(_acting, "runner", None)
    return runner if runner is not None else _process_runner


def _register_runner(runner: Any) -> None:
    """Record a newly built EnvRunner; the latest training runner is the process's one."""
    global _process_runner
    if not getattr(runner.config, "in_evaluation", False):
        _process_runner = runner


def _unregister_runner(runner: Any) -> None:
    global _process_runner
    if _process_runner is runner:
        _process_runner = None


@contextlib.contextmanager
def acting_runner(runner: Any) -> Iterator[None]:
    """Make `runner` what get_global_worker() returns in this thread for the duration."""
    previous = getattr(_acting, "runner", None)
    _acting.runner = runner
    try:
        yield
    finally:
        _acting.runner = previous


def __getattr__(name: str) -> Any:
    # RolloutWorker is the EnvRunner class; imported lazily to keep this module free of torch.
    if name == "RolloutWorker":
        from rlx.env.env_runner import SingleAgentEnvRunner

        return SingleAgentEnvRunner
    raise AttributeError(name)
