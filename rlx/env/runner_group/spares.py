"""A spare worker process for restarting an EnvRunnerGroup's runners whose process died.

Starting a worker process costs far more than building a runner in one: seconds for a fresh
"spawn" interpreter importing torch, still around a second under load for a fork of the fork
server that then imports the env's modules (rlx.utils.spawn). A group whose failed runners are restarted
(restart_failed_env_runners) keeps one spare process started, from the end of its build on: a
restart of a runner whose process died (or hung and was killed) adopts the spare, which only
has to build the runner, and the next spare starts beside training once that runner is back. Only the "process"
backend has spares (a thread starts at once; Ray places and restarts its own actors).
"""
from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

from rlx.env.process_env_runner import ProcessEnvRunner
from rlx.env.runner_host import RunnerFactory

logger = logging.getLogger("rlx")


class SpareWorker:
    """Holds at most one started spare worker process for one group's restarts."""

    def __init__(self, backend: str, runner_cls: Any, config: Any, module_spec: Any):
        self._enabled = backend == "process" and bool(config.restart_failed_env_runners)
        self._runner_cls, self._config, self._module_spec = runner_cls, config, module_spec
        self._spare: ProcessEnvRunner | None = None
        self._stopped = False

    @property
    def pid(self) -> int | None:
        """The spare process's id (None without a spare)."""
        return None if self._spare is None else self._spare.pid

    def take(self, index: int, factory: RunnerFactory) -> tuple[ProcessEnvRunner, Future] | None:
        """Adopt the spare as runner `index` (built by `factory`): (its handle, the Future of its
        runner's build), or None when there is no usable spare (it died, or it was taken and
        the next one has not been started yet). The group starts the next spare (`replenish`)
        once the restart is done, so that two process starts do not compete for the CPUs."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if not spare.healthy or (spare.ready.done() and spare.ready.exception() is not None):
            spare.kill()
            spare.stop()
            return None
        return spare, spare.adopt(index, factory)

    def replenish(self) -> None:
        """Start a spare process when there is none (and the group restarts dead runners)."""
        if not self._enabled or self._stopped or self._spare is not None:
            return
        try:
            threads = max(1, int(self._config.num_cpus_per_env_runner or 1))
            self._spare = ProcessEnvRunner.spare(self._runner_cls, self._config, int(self._config.num_env_runners),
                                                 self._module_spec, num_threads=threads)
        except Exception as err:  # e.g. out of processes: restarts then start their own workers
            logger.warning("Could not start a spare EnvRunner process (%s: %s); restarts start new ones.",
                           type(err).__name__, err)

    def stop(self) -> None:
        """Stop the spare process (if any); no new one starts afterwards."""
        self._stopped = True
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.kill()  # it holds no runner and may still be starting: nothing to close
            spare.stop()
