"""Optional env interfaces rlx understands (curriculum: TaskSettableEnv)."""
from rlx.env.apis.task_settable_env import TaskSettableEnv, TaskType

__all__ = ["TaskSettableEnv", "TaskType"]
