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
    """A local EnvRunner (index 0) and any remote EnvRunners (indices 1..N)."""

    def __init__(
        self,
        config: Any,
        module_spec: RLModuleSpec | None = None,
        module: RLModule | None = None,
        local_env_runner: bool = True,
    ):
        self.config = config
        runner_cls = config.env_runner_cls or SingleAgentEnvRunner
        if isinstance(runner_cls, str):
            from rlx.env.registry import import_object

            runner_cls = import_object(runner_cls)
        self._local_env_runner = runner_cls(
            config=config,
            worker_index=0,
            num_workers=config.num_env_runners,
            module_spec=module_spec,
            module=module,
        )

    # ------------------------------------------------------------ runners

    @property
    def local_env_runner(self) -> SingleAgentEnvRunner:
        """The EnvRunner in this process."""
        return self._local_env_runner

    def local_worker(self) -> SingleAgentEnvRunner:
        """Old name of `local_env_runner`."""
        return self._local_env_runner

    def num_remote_env_runners(self) -> int:
        """Number of remote EnvRunners."""
        return 0

    num_remote_workers = num_remote_env_runners

    def num_healthy_remote_workers(self) -> int:
        """Number of remote EnvRunners that answer."""
        return 0

    num_healthy_remote_env_runners = num_healthy_remote_workers

    def healthy_worker_ids(self) -> list[int]:
        """Indices of healthy remote EnvRunners."""
        return []

    def remote_workers(self) -> list[Any]:
        """Remote EnvRunner handles (old API)."""
        return []

    # ------------------------------------------------------------ foreach

    def foreach_env_runner(
        self,
        func: Callable[[Any], Any],
        local_env_runner: bool = True,
        healthy_only: bool = True,
        remote_worker_ids: list[int] | None = None,
    ) -> list[Any]:
        """Apply `func(runner)` to each runner (local first) and return the results as a list."""
        return [func(self._local_env_runner)] if local_env_runner else []

    def foreach_worker(self, func: Callable[[Any], Any], local_worker: bool = True, **kwargs: Any) -> list[Any]:
        """Old name of `foreach_env_runner`."""
        return self.foreach_env_runner(func, local_env_runner=local_worker, **kwargs)

    def foreach_env_runner_with_id(self, func: Callable[[int, Any], Any], local_env_runner: bool = True) -> list[Any]:
        """Apply `func(index, runner)` to each runner."""
        return [func(0, self._local_env_runner)] if local_env_runner else []

    foreach_worker_with_id = foreach_env_runner_with_id

    def foreach_worker_with_index(self, func: Callable[[Any, int], Any], local_worker: bool = True) -> list[Any]:
        """Apply `func(runner, index)` to each runner (old API argument order)."""
        return [func(self._local_env_runner, 0)] if local_worker else []

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
        """Episode metrics from every runner since the last call."""
        return self.foreach_env_runner(lambda r: r.get_metrics())

    def sync_weights(
        self,
        policies: list[str] | None = None,
        from_worker_or_learner_group: Any = None,
        to_worker_indices: list[int] | None = None,
        global_vars: dict | None = None,
        inference_only: bool = False,
    ) -> None:
        """Push weights from the learner (or a given source) to the runners.

        The local runner shares its module with the local Learner, so only remote
        runners (none yet) need a copy.
        """
        if from_worker_or_learner_group is None:
            return
        source_module = getattr(from_worker_or_learner_group, "module", None)
        if source_module is self._local_env_runner.module:
            return
        weights = from_worker_or_learner_group.get_weights()
        if isinstance(weights, dict) and "default_policy" in weights:
            weights = weights["default_policy"]
        self._local_env_runner.set_weights(weights)

    def stop(self) -> None:
        """Stop every runner and close its envs."""
        self._local_env_runner.stop()
