"""Curriculum learning (`config.env_runners(env_task_fn=...)`): after each train() the
function picks every training sub-env's next task from the result.

The envs must be task-settable (`get_task()` / `set_task(task)`, e.g. subclasses of
rlx.env.apis.task_settable_env.TaskSettableEnv); the Algorithm checks that when it is built.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlx.utils.errors import ConfigError

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm


def apply_env_task_fn(algo: "Algorithm", result: dict[str, Any]) -> None:
    """Set every training sub-env to the task env_task_fn(result, env, env_context) returns."""
    fn = algo.config.env_task_fn

    def set_task(env: Any, ctx: Any) -> None:
        target = task_settable(env)
        target.set_task(fn(result, target, ctx))

    algo.env_runner_group.foreach_env_runner(lambda runner: runner.foreach_env_with_context(set_task))


def task_settable(env: Any) -> Any:
    """The object with get_task/set_task: the env itself or, under Gymnasium wrappers, the
    unwrapped env; raises ConfigError when neither has them."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        if candidate is not None and callable(getattr(candidate, "set_task", None)) \
                and callable(getattr(candidate, "get_task", None)):
            return candidate
    raise ConfigError(
        f"env_task_fn is set, but the env {type(getattr(env, 'unwrapped', env)).__name__} is not task-settable: "
        "it needs get_task() and set_task(task) methods. Subclass "
        "rlx.env.apis.task_settable_env.TaskSettableEnv, or remove env_task_fn."
    )


def check_task_settable(runner: Any) -> None:
    """ConfigError unless every sub-env of `runner` is task-settable (shipped to remote runners)."""
    runner.foreach_env(task_settable)
