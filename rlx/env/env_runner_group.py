"""EnvRunnerGroup: the local EnvRunner plus (later) remote ones, behind one interface.

The Algorithm only talks to the group: `sample()`, `sync_weights()`, `get_metrics()`,
`foreach_env_runner()`. Remote backends (worker processes, Ray actors) implement the
same methods, so algorithms never know where their runners live.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rlx.core.rl_module import RLModule, RLModuleSpec
from rlx.env.env_runner import SingleAgentEnvRunner
from rlx.env.threaded_env_runner import ThreadedEnvRunner


def concat_batches(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Join time-major batches of the same sub-envs along the time axis."""
    if len(batches) == 1:
        return batches[0]
    keys = set().union(*batches)
    out = {}
    for k in keys:
        parts = []
        for b in batches:
            if k in b:
                parts.append(b[k])
            elif k == "valid":
                parts.append(np.ones(b["rewards"].shape, dtype=bool))
        out[k] = np.concatenate(parts, axis=0)
    return out


class EnvRunnerGroup:
    """A local EnvRunner (index 0) and any remote EnvRunners (indices 1..N).

    Args:
        config: the frozen AlgorithmConfig (`num_env_runners` remote runners).
        module_spec: spec to build each runner's module from.
        module: a module for the local runner to share (the local Learner's).
        local_env_runner: whether to create the local runner. A group with no remote
            runners always has one.
        remote_backend: "thread" runs remote runners in this process, each on its own
            thread (used by evaluation); worker processes and Ray come with the scale-out work.
    """

    def __init__(
        self,
        config: Any,
        module_spec: RLModuleSpec | None = None,
        module: RLModule | None = None,
        local_env_runner: bool = True,
        remote_backend: str = "thread",
    ):
        self.config = config
        self._module_spec = module_spec
        runner_cls = config.env_runner_cls or SingleAgentEnvRunner
        if isinstance(runner_cls, str):
            from rlx.env.registry import import_object

            runner_cls = import_object(runner_cls)
        self._runner_cls = runner_cls
        num_remote = int(config.num_env_runners)
        if remote_backend != "thread":
            raise ValueError(f"Unknown EnvRunner backend {remote_backend!r}; available: 'thread'.")
        self._local_env_runner = None
        if local_env_runner or num_remote == 0:
            self._local_env_runner = runner_cls(
                config=config, worker_index=0, num_workers=num_remote, module_spec=module_spec, module=module,
            )
        self._remote: list[ThreadedEnvRunner] = [self._make_remote(i) for i in range(1, num_remote + 1)]
        self.num_remote_worker_restarts = 0

    def _make_remote(self, index: int) -> ThreadedEnvRunner:
        runner = self._runner_cls(
            config=self.config, worker_index=index, num_workers=int(self.config.num_env_runners),
            module_spec=self._module_spec,
        )
        return ThreadedEnvRunner(runner, index)

    # ------------------------------------------------------------ runners

    @property
    def local_env_runner(self) -> SingleAgentEnvRunner | None:
        """The EnvRunner in this process (None when the group has only remote runners)."""
        return self._local_env_runner

    def local_worker(self) -> SingleAgentEnvRunner | None:
        """Old name of `local_env_runner`."""
        return self._local_env_runner

    def num_remote_env_runners(self) -> int:
        """Number of remote EnvRunners."""
        return len(self._remote)

    num_remote_workers = num_remote_env_runners

    def num_healthy_remote_workers(self) -> int:
        """Number of remote EnvRunners that answer."""
        return sum(1 for r in self._remote if r.healthy)

    num_healthy_remote_env_runners = num_healthy_remote_workers

    def healthy_worker_ids(self) -> list[int]:
        """Indices of healthy remote EnvRunners."""
        return [r.index for r in self._remote if r.healthy]

    healthy_env_runner_ids = healthy_worker_ids

    def remote_workers(self) -> list[Any]:
        """Remote EnvRunner handles (old API)."""
        return list(self._remote)

    def runner_handles(self) -> list[ThreadedEnvRunner]:
        """Handles that run calls concurrently: the remote runners, or (with none) the local one
        wrapped in its own thread. Evaluation schedules its work on these."""
        if self._remote:
            return list(self._remote)
        if not hasattr(self, "_local_handle"):
            self._local_handle = ThreadedEnvRunner(self._local_env_runner, 0)
        return [self._local_handle]

    def recreate_runner(self, index: int) -> None:
        """Replace remote runner `index` (or the local one, 0) by a freshly built one."""
        if index == 0:
            old = self._local_env_runner
            self._local_env_runner = self._runner_cls(
                config=self.config, worker_index=0, num_workers=len(self._remote), module_spec=self._module_spec,
            )
            if hasattr(self, "_local_handle"):
                self._local_handle.stop(close_runner=True)
                self._local_handle = ThreadedEnvRunner(self._local_env_runner, 0)
            elif old is not None:
                old.stop()
        else:
            pos = [r.index for r in self._remote].index(index)
            self._remote[pos].stop()
            self._remote[pos] = self._make_remote(index)
        self.num_remote_worker_restarts += 1

    # ------------------------------------------------------------ foreach

    def foreach_env_runner(
        self,
        func: Callable[[Any], Any],
        local_env_runner: bool = True,
        healthy_only: bool = True,
        remote_worker_ids: list[int] | None = None,
        timeout_seconds: float | None = None,
    ) -> list[Any]:
        """Apply `func(runner)` to each runner (local first, then remote ones concurrently) and
        return the results as a list."""
        out = []
        if local_env_runner and self._local_env_runner is not None:
            out.append(func(self._local_env_runner))
        handles = [
            r for r in self._remote
            if (remote_worker_ids is None or r.index in remote_worker_ids) and (r.healthy or not healthy_only)
        ]
        futures = [h.submit(func) for h in handles]
        out.extend(f.result(timeout=timeout_seconds) for f in futures)
        return out

    def foreach_worker(self, func: Callable[[Any], Any], local_worker: bool = True, **kwargs: Any) -> list[Any]:
        """Old name of `foreach_env_runner`."""
        return self.foreach_env_runner(func, local_env_runner=local_worker, **kwargs)

    def foreach_env_runner_with_id(self, func: Callable[[int, Any], Any], local_env_runner: bool = True) -> list[Any]:
        """Apply `func(index, runner)` to each runner."""
        out = []
        if local_env_runner and self._local_env_runner is not None:
            out.append(func(0, self._local_env_runner))
        futures = [h.submit(lambda r, i=h.index: func(i, r)) for h in self._remote if h.healthy]
        out.extend(f.result() for f in futures)
        return out

    foreach_worker_with_id = foreach_env_runner_with_id

    def foreach_worker_with_index(self, func: Callable[[Any, int], Any], local_worker: bool = True) -> list[Any]:
        """Apply `func(runner, index)` to each runner (old API argument order)."""
        return self.foreach_env_runner_with_id(lambda i, r: func(r, i), local_env_runner=local_worker)

    # ------------------------------------------------------------ data

    def sample(self, num_timesteps: int | None = None, explore: bool | None = None) -> dict[str, np.ndarray]:
        """Collect at least `num_timesteps` env steps (one fragment when None) as one batch."""
        runner = self._local_env_runner
        if num_timesteps is None:
            return runner.sample(explore=explore)
        batches = []
        collected = 0
        while collected < num_timesteps:
            batch = runner.sample(explore=explore)
            steps = int(batch["valid"].sum()) if "valid" in batch else batch["rewards"].size
            batches.append(batch)
            collected += steps
        return concat_batches(batches)

    def get_metrics(self) -> list[dict[str, Any]]:
        """Each runner's metrics since the last call (dicts of Stats, see EnvRunner.get_metrics)."""
        return self.foreach_env_runner(lambda r: r.get_metrics())

    def sync_weights(
        self,
        policies: list[str] | None = None,
        from_worker_or_learner_group: Any = None,
        to_worker_indices: list[int] | None = None,
        global_vars: dict | None = None,
        inference_only: bool = False,
        weights_seq_no: int | None = None,
    ) -> None:
        """Push weights from the learner (or a given source) to the runners.

        A runner that shares its module with the source needs no copy. Remote runners that
        are still busy (e.g. stuck in a slow env) are skipped; they get the next sync.
        """
        if from_worker_or_learner_group is None:
            return
        source_module = getattr(from_worker_or_learner_group, "module", None)
        weights = None

        def get_weights() -> Any:
            nonlocal weights
            if weights is None:
                weights = from_worker_or_learner_group.get_weights()
                if isinstance(weights, dict) and "default_policy" in weights:
                    weights = weights["default_policy"]
            return weights

        local = self._local_env_runner
        if local is not None and (to_worker_indices is None or 0 in to_worker_indices):
            if local.module is not source_module:
                local.set_weights(get_weights(), weights_seq_no=weights_seq_no)
            elif weights_seq_no is not None:
                local.weights_seq_no = int(weights_seq_no)
        for handle in self._remote:
            if handle.busy or not handle.healthy:
                continue
            if to_worker_indices is None or handle.index in to_worker_indices:
                handle.runner.set_weights(get_weights(), weights_seq_no=weights_seq_no)

    def sync_filters(self, source: Any) -> None:
        """Copy the observation filter state of `source` (an EnvRunner) to every idle runner."""
        state = source.filter.get_state()
        for runner in self.idle_runners():
            if runner is not source:
                runner.filter.set_state(state)

    def idle_runners(self) -> list[Any]:
        """The runners that can take a call now: the local one and every healthy remote one not busy."""
        local_handle = getattr(self, "_local_handle", None)
        local_free = self._local_env_runner is not None and not (local_handle is not None and local_handle.busy)
        runners = [self._local_env_runner] if local_free else []
        runners.extend(h.runner for h in self._remote if h.healthy and not h.busy)
        return runners

    def stop(self) -> None:
        """Stop every runner and close its envs."""
        for handle in self._remote:
            handle.stop()
        if hasattr(self, "_local_handle"):
            # Closes the envs once a call still running on the handle's thread has returned.
            self._local_handle.stop(close_runner=True)
        elif self._local_env_runner is not None:
            self._local_env_runner.stop()
