"""RunnerHost: the EnvRunner a backend's worker serves, replaceable in place.

Every remote backend (a worker process, a Ray actor, a thread) holds one EnvRunner and
applies the driver's calls `fn(runner)` to it. When the runner's env raised, the worker
itself is fine: restarting the runner then means building a new EnvRunner object in the same
worker (new envs, module and state), which takes as long as building the envs, not as long
as starting a process. The driver asks for that with a `RebuildRunner` call, queued like any
other call, so the calls it queues afterwards reach the new runner.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from rlx.env.config_view import EnvConfig

logger = logging.getLogger("rlx")


class RunnerFactory:
    """Builds the EnvRunner of one worker: `runner_cls(config=..., worker_index=..., ...)`.

    Picklable (with cloudpickle, as the config is), so it travels to worker processes and Ray
    actors inside a RebuildRunner call.
    """

    def __init__(self, runner_cls: type, config: EnvConfig, index: int, num_workers: int, module_spec: Any = None):
        self.runner_cls, self.config, self.index = runner_cls, config, index
        self.num_workers, self.module_spec = num_workers, module_spec

    def __call__(self) -> Any:
        return self.runner_cls(config=self.config, worker_index=self.index, num_workers=self.num_workers,
                               module_spec=self.module_spec)


class RebuildRunner:
    """The call that replaces a worker's EnvRunner by a freshly built one (a restart in place).

    The old runner is stopped (its envs closed; errors there are logged, not raised), then the
    factory builds the new one. When building raises, the worker has no runner until the next
    RebuildRunner, and its other calls fail with an error that says why.
    """

    def __init__(self, factory: Callable[[], Any]):
        self.factory = factory


#: A call a RunnerHost applies: `fn(runner)`, or a RebuildRunner.
RunnerCall = Callable[[Any], Any] | RebuildRunner


class RunnerHost:
    """Holds the runner a worker serves and applies calls to it (see the module docstring)."""

    def __init__(self, runner: Any = None, missing: str = "it was not built"):
        self.runner = runner
        self._missing = missing

    def apply(self, fn: RunnerCall) -> Any:
        """`fn(runner)`, or for a RebuildRunner the runner replaced (returns None)."""
        if isinstance(fn, RebuildRunner):
            self.rebuild(fn.factory)
            return None
        if self.runner is None:
            raise RuntimeError(f"EnvRunner not available ({self._missing}).")
        return fn(self.runner)

    def rebuild(self, factory: Callable[[], Any]) -> None:
        """Stop the current runner and build a new one with `factory`."""
        self.close()
        try:
            self.runner = factory()
        except BaseException as err:
            self._missing = f"building it failed: {type(err).__name__}: {err}"
            raise
        self._missing = "it was stopped"

    def close(self) -> None:
        """Stop the runner (close its envs) and let go of it; a failure to stop is only logged."""
        runner, self.runner = self.runner, None
        self._missing = "it was stopped"
        if runner is None:
            return
        try:
            runner.stop()
        except Exception as err:  # a broken env may not close cleanly; the runner is discarded either way
            logger.warning("Stopping EnvRunner %s raised %s: %s", getattr(runner, "worker_index", "?"),
                           type(err).__name__, err)
