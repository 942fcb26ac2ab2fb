"""What an EnvRunner sampled before one of its envs failed: kept, not thrown away.

With `restart_failed_sub_environments=False` an env that raises in `step()` or `reset()`
fails the whole `sample()` call, and (with `restart_failed_env_runners`) the runner is
replaced. The rows sampled before the failure are good data, though: every runner class
cuts them to what stays valid (`cut_time_major`) and hands them to `attach_partial_fragment`,
which puts them on the exception as a `PartialFragment`. The exception travels to the driver
as usual (pickled from a worker process, inside a RayTaskError from a Ray actor), and
`partial_fragment_of(err)` finds the fragment there again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.core.columns import Columns

#: The exception attribute that carries the fragment.
_ATTRIBUTE = "rlx_partial_fragment"


@dataclass
class PartialFragment:
    """The rows a runner sampled in a `sample()` call that an env error ended.

    `batch` is what `sample()` would have returned for those rows (a time-major dict, or a
    MultiAgentBatch of them) with every episode in progress ended as a truncation at its last
    good row (with batch_mode='complete_episodes': those rows marked invalid instead);
    `metrics` is the runner's `get_metrics()` from the same moment (the episodes it completed),
    and `weights_seq_no` the version of the weights it sampled with.
    """

    batch: Any
    weights_seq_no: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)


def cut_time_major(batch: dict[str, np.ndarray], complete_episodes: bool) -> dict[str, np.ndarray]:
    """End every column of a time-major batch whose sampling stopped early (in place; returned).

    The column's last valid row becomes a truncation (the episode was cut there; its next
    observation is real, so learners bootstrap from it). With `complete_episodes` the rows after
    the column's last episode end are marked invalid instead, so only whole episodes stay.
    """
    rewards = batch[Columns.REWARDS]
    T = rewards.shape[0]
    if T == 0:
        return batch
    ended = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
    valid = batch.get(Columns.VALID)
    if valid is None:
        valid = np.ones(rewards.shape, dtype=bool)
    rows = np.arange(T)[:, None]
    if complete_episodes:
        last_end = np.where(ended & valid, rows, -1).max(axis=0)
        batch[Columns.VALID] = valid & (rows <= last_end[None, :])
        return batch
    last_valid = np.where(valid, rows, -1).max(axis=0)
    columns = np.flatnonzero(last_valid >= 0)
    open_columns = columns[~ended[last_valid[columns], columns]]
    batch[Columns.TRUNCATEDS][last_valid[open_columns], open_columns] = True
    return batch


def attach_partial_fragment(err: BaseException, runner: Any, batch: Any, env_steps: int,
                            agent_steps: int | None = None) -> BaseException:
    """Put what `runner` sampled before `err` on `err` (see PartialFragment) and return `err`.

    `batch` is already cut (cut_time_major); its steps are logged like those of a finished
    `sample()` call before the runner's metrics are taken along.
    """
    metrics = runner.metrics
    metrics.log_value("num_env_steps_sampled", int(env_steps), reduce="sum", clear_on_reduce=True)
    if agent_steps is not None:
        metrics.log_value("num_agent_steps_sampled", int(agent_steps), reduce="sum", clear_on_reduce=True)
    fragment = PartialFragment(batch, int(getattr(runner, "weights_seq_no", 0) or 0), runner.get_metrics())
    try:
        setattr(err, _ATTRIBUTE, fragment)
    except AttributeError:  # an exception type with __slots__: the rows are lost, the error is not
        pass
    return err


def partial_fragment_of(err: BaseException | None) -> PartialFragment | None:
    """The PartialFragment on `err` (or on the error it wraps: a Ray task error's `cause`), else None."""
    seen = 0
    while err is not None and seen < 4:
        fragment = getattr(err, _ATTRIBUTE, None)
        if isinstance(fragment, PartialFragment):
            return fragment
        err = getattr(err, "cause", None) or err.__cause__
        seen += 1
    return None


def take_partial_fragment(err: BaseException | None) -> PartialFragment | None:
    """`partial_fragment_of(err)`, removed from the error so that it is used once (and the error,
    which may be kept as a runner's `last_error`, does not hold the rows)."""
    fragment = partial_fragment_of(err)
    while err is not None and fragment is not None:
        if getattr(err, _ATTRIBUTE, None) is fragment:
            try:
                delattr(err, _ATTRIBUTE)
            except AttributeError:
                pass
            break
        err = getattr(err, "cause", None) or err.__cause__
    return fragment
