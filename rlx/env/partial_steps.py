"""Partial steps of remote sub-envs (`remote_env_batch_wait_ms` > 0), SEED-style.

With `remote_worker_envs=True` every sub-env steps in its own process. By default the
EnvRunner waits each step until all of them have answered, so one slow sub-env holds up the
others. With `remote_env_batch_wait_ms` > 0 it waits at most that long, acts only for the
sub-envs that have answered (one batched forward pass) and sends them their next actions,
while the slow ones keep stepping; their answers are collected by a later poll.

The runner's loop still writes time-major rows: each loop iteration is one row, and a sub-env
fills a row only in the iterations its answer arrives (the others are marked invalid there).
`PartialSteps` remembers, for each sub-env with a step in flight, the row its observation and
action were written in, and moves them to the row its answer lands in. At the end of the
sample, `compact_columns` moves each column's filled rows to the top, so every column is one
sub-env's consecutive steps; fast sub-envs contribute more rows than slow ones, and the rows
past a column's end are padding marked invalid in the `valid` column (as in batches of
`batch_mode="complete_episodes"`, which the Learners already handle).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlx.core.columns import Columns
from rlx.env.remote_sub_env import ready_sub_envs

#: The columns the runner writes when it acts (the rest are written when the step's answer arrives).
_ACT_COLUMNS = (Columns.OBS, Columns.ACTIONS, Columns.ACTION_LOGP)


class PartialSteps:
    """Which sub-envs of one EnvRunner have a step in flight, and what was sent to them.

    Args:
        num_envs: sub-envs of the runner.
        wait_ms: remote_env_batch_wait_ms: how long a poll waits for all sub-envs to answer.
        initial_state: a recurrent module's initial state ({name: array}); {} for stateless ones.
    """

    def __init__(self, num_envs: int, wait_ms: float, initial_state: dict[str, np.ndarray]):
        self.timeout_s = float(wait_ms) / 1000.0
        #: The batch row each sub-env's step in flight was written in; -1: none in flight.
        self.sent_row = np.full(num_envs, -1, dtype=np.int64)
        self._sent_actions: list[Any] = [None] * num_envs
        #: A recurrent module's state after the step in flight (its next state_in).
        self.sent_state = {k: np.zeros((num_envs,) + v.shape, np.float32) for k, v in initial_state.items()}

    @property
    def num_in_flight(self) -> int:
        """Sub-envs with a step in flight."""
        return int((self.sent_row >= 0).sum())

    def free(self, indices: Sequence[int]) -> list[int]:
        """Those of `indices` without a step in flight (they may be sent an action)."""
        return [i for i in indices if self.sent_row[i] < 0]

    def send(self, envs: Sequence[Any], indices: Sequence[int], env_actions: Any, row: int,
             next_state: dict[str, np.ndarray] | None) -> None:
        """Send sub-envs `indices` their actions of batch row `row` (`step_async`)."""
        for i in indices:
            envs[i].step_async(env_actions[i])
            self.sent_row[i] = row
            action = env_actions[i]
            self._sent_actions[i] = action.copy() if isinstance(action, np.ndarray) else action
        if next_state is not None and len(indices):
            for k, v in self.sent_state.items():
                v[indices] = next_state[k][indices]

    def poll(self, envs: Sequence[Any]) -> list[int]:
        """The sub-envs whose step has answered (see ready_sub_envs); at least one while any is in flight."""
        waiting = np.flatnonzero(self.sent_row >= 0).tolist()
        return ready_sub_envs(envs, waiting, self.timeout_s) if waiting else []

    def land(self, arrived: Sequence[int], row: int, buf: dict[str, np.ndarray], dist_buf: np.ndarray,
             state_columns: Sequence[str], env_actions: Any) -> None:
        """Move what was written when the `arrived` sub-envs were sent their actions (observation,
        action, log-probability, distribution inputs, state) into batch row `row`, where their
        answers are written, and put the actions they took into `env_actions`."""
        for i in arrived:
            sent = int(self.sent_row[i])
            self.sent_row[i] = -1
            env_actions[i] = self._sent_actions[i]
            self._sent_actions[i] = None
            if sent == row:
                continue
            for column in (*_ACT_COLUMNS, *state_columns):
                buf[column][row, i] = buf[column][sent, i]
            dist_buf[row, i] = dist_buf[sent, i]

    def drop_in_flight(self, envs: Sequence[Any]) -> list[int]:
        """Collect and drop the answers of every step still in flight; the sub-envs they belong to."""
        dropped = np.flatnonzero(self.sent_row >= 0).tolist()
        for i in dropped:
            try:
                envs[i].step_wait()
            except Exception:  # noqa: BLE001 - the step is dropped with whatever it raised
                pass
            self.sent_row[i] = -1
            self._sent_actions[i] = None
        return dropped


def compact_columns(batch: dict[str, np.ndarray],
                    row_episodes: list[list[Any]] | None = None) -> tuple[dict[str, np.ndarray], list[list[Any]] | None]:
    """Move each column's valid rows (in order) to the top of the column; the rows after a
    column's end are zeros marked invalid. Returns the compacted batch and `row_episodes` (a
    per-row list of each column's episode) rearranged the same way (None in padding rows)."""
    valid = np.asarray(batch[Columns.VALID], bool)
    T, B = valid.shape
    counts = valid.sum(axis=0)
    T_new = int(counts.max()) if B else 0
    # src[t, b]: the row of column b that becomes its row t (padding rows point at row 0).
    order = np.argsort(~valid, axis=0, kind="stable")[:T_new]
    new_valid = np.arange(T_new)[:, None] < counts[None, :]
    src = np.where(new_valid, order, 0)
    cols = np.arange(B)[None, :]
    out = {}
    for key, value in batch.items():
        gathered = value[src, cols]
        gathered[~new_valid] = 0
        out[key] = gathered
    out[Columns.VALID] = new_valid
    if row_episodes is not None:
        row_episodes = [[row_episodes[src[t, b]][b] if new_valid[t, b] else None for b in range(B)]
                        for t in range(T_new)]
    return out, row_episodes
