"""TaskSettableEnv: an env whose task (difficulty, layout, ...) can be read and changed.

With `config.environment(env_task_fn=fn)`, rlx calls `fn(train_results, env, env_context)`
after every `Algorithm.train()` for each training sub-env and sets the env to the task it
returns (curriculum learning). Any env with `get_task()` and `set_task(task)` works; this
base class documents the interface.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

TaskType = Any


class TaskSettableEnv(gym.Env):
    """A Gymnasium env with a settable task; subclasses implement get_task and set_task."""

    def sample_tasks(self, n_tasks: int) -> list[TaskType]:
        """`n_tasks` tasks drawn from this env's task distribution (for meta-learning).

        Subclasses that have a task distribution override this; the base class has none.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not define sample_tasks(n_tasks); override it to draw tasks "
            "from the env's task distribution."
        )

    def get_task(self) -> TaskType:
        """The task the env is set to now."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_task() to be task-settable.")

    def set_task(self, task: TaskType) -> None:
        """Set the env to `task`; it takes effect from the next reset() on, or at once."""
        raise NotImplementedError(f"{type(self).__name__} must implement set_task(task) to be task-settable.")
