"""Progress within a training iteration, as events: env steps sampled and gradient updates
done, reported to one listener (a progress display, see rlx.utils.progress).

The sampling and learning loops report through here at a coarse grain (one call per vector
step of the local EnvRunner, per fragment a remote runner returns to its group, per optimizer
step of a learner in this process); with no listener installed a report costs one attribute
check. A listener belongs to the process that installed it: runners and learners in other
processes (forked ones included) never report to it, their steps are counted by the runner
group when their fragments arrive, and evaluation runners are not counted at all.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Protocol


class ProgressListener(Protocol):
    """What receives progress events."""

    def on_env_steps(self, n: int) -> None:
        """`n` more env steps were sampled."""

    def on_updates(self, n: int) -> None:
        """`n` more gradient updates were done."""


class _Installed:
    """The listener of this process, with the process and thread that installed it."""

    __slots__ = ("listener", "pid")

    def __init__(self, listener: ProgressListener):
        self.listener = listener
        self.pid = os.getpid()


_current: _Installed | None = None


@contextlib.contextmanager
def listening(listener: ProgressListener) -> Iterator[ProgressListener]:
    """Send the progress events of this process's training to `listener` while the block runs
    (the listener installed before comes back afterwards)."""
    global _current
    previous, _current = _current, _Installed(listener)
    try:
        yield listener
    finally:
        _current = previous


def _listener(config: Any = None) -> ProgressListener | None:
    installed = _current
    if installed is None or installed.pid != os.getpid() or getattr(config, "in_evaluation", False):
        return None
    return installed.listener


def env_step_listener(runner: Any) -> ProgressListener | None:
    """The listener `runner`'s sampling loop reports its env steps to: None unless one was
    installed in this process and `runner` is a local (index 0), non-evaluation runner (a
    remote runner's steps are counted by its group when its fragment arrives)."""
    if getattr(runner, "worker_index", 0):
        return None
    return _listener(getattr(runner, "config", None))


def report_env_steps(n: int, config: Any = None) -> None:
    """Report `n` env steps that remote runners of a group with `config` returned (none
    for an evaluation group's)."""
    listener = _listener(config)
    if listener is not None and n:
        listener.on_env_steps(int(n))


def report_updates(n: int = 1) -> None:
    """Report `n` gradient updates done in this process (from any thread: a learner thread
    counts too)."""
    listener = _listener()
    if listener is not None:
        listener.on_updates(n)
