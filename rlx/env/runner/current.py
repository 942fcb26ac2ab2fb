"""`get_global_worker()`: the EnvRunner (old name: RolloutWorker) of the calling process.

Callbacks use it to reach the runner they run in. Inside `EnvRunner.sample()` it is that
runner (also for evaluation runners driven by their own threads); elsewhere it is the
latest training EnvRunner created in this process that is still in use.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator

_acting = threading.local()
# Training EnvRunners built in this process, oldest first (weak: a dropped Algorithm's runner
# must neither be returned nor kept alive). The last one alive is the process's runner.
_process_runners: list[weakref.ref] = []


def get_global_worker() -> Any:
    """The EnvRunner running in this process (or thread), or None when there is none.

    Inside an EnvRunner's sample() and its on_environment_created event that runner;
    elsewhere the latest training EnvRunner built in this process that was not stopped.
    """
    runner = getattr(_acting, "runner", None)
    if runner is not None:
        return runner
    for ref in reversed(_process_runners):
        runner = ref()
        if runner is not None:
            return runner
    return None


def register_runner(runner: Any) -> None:
    """Record a newly built training EnvRunner; a local one (worker_index 0) wins over remote ones."""
    if getattr(runner.config, "in_evaluation", False):
        return
    _process_runners[:] = [ref for ref in _process_runners if ref() is not None]
    if getattr(runner, "worker_index", 0) == 0:
        _process_runners.append(weakref.ref(runner))
    else:
        _process_runners.insert(0, weakref.ref(runner))


def unregister_runner(runner: Any) -> None:
    """Forget a stopped EnvRunner."""
    _process_runners[:] = [ref for ref in _process_runners if ref() is not None and ref() is not runner]


@contextlib.contextmanager
def acting_runner(runner: Any) -> Iterator[None]:
    """Make `runner` what get_global_worker() returns in this thread for the duration."""
    previous = getattr(_acting, "runner", None)
    _acting.runner = runner
    try:
        yield
    finally:
        _acting.runner = previous
