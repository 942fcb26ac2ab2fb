"""Calling a function on the runners of an EnvRunnerGroup (foreach_env_runner and its old
names): the local runner in this process, the remote ones concurrently, and the old
`(worker, index)` argument order that older RLlib code still uses.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

_WORKER_NAMES = frozenset({"ev", "w", "worker", "env_runner", "runner", "rollout_worker", "evaluator", "er"})
_INDEX_NAMES = frozenset({"i", "idx", "index", "id", "_id", "worker_id", "worker_index", "wid", "_i", "_idx"})


def foreach_runner(group: Any, func: Callable[[Any], Any], local_env_runner: bool, healthy_only: bool,
                   remote_worker_ids: list[int] | None, timeout_seconds: float | None) -> list[Any]:
    """`func(runner)` of each runner of `group` (local first, then the remote ones concurrently)."""
    out = []
    if local_env_runner and group.local_env_runner is not None:
        out.append(func(group.local_env_runner))
    handles = [
        r for r in group._remote
        if (remote_worker_ids is None or r.index in remote_worker_ids) and (group._ft.is_up(r) or not healthy_only)
    ]
    futures = [h.submit(func) for h in handles]
    out.extend(f.result(timeout=timeout_seconds) for f in futures)
    return out


def foreach_runner_with_id(group: Any, func: Callable[[int, Any], Any], local_env_runner: bool) -> list[Any]:
    """`func(index, runner)` of each runner of `group` in service."""
    out = []
    if local_env_runner and group.local_env_runner is not None:
        out.append(func(0, group.local_env_runner))
    futures = [h.submit(lambda r, i=h.index: func(i, r)) for h in group._ft.up_handles()]
    out.extend(f.result() for f in futures)
    return out


def worker_first(func: Callable[..., Any]) -> bool:
    """Whether `func` names its two parameters in the old (worker, index) order: its first parameter
    has a worker's name or its second an index's."""
    try:
        names = [p.name for p in inspect.signature(func).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    if len(names) < 2:
        return False
    first, second = names[0].lower(), names[1].lower()
    return first in _WORKER_NAMES or (second in _INDEX_NAMES and first not in _INDEX_NAMES)
