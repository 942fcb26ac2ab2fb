"""The one writer of sampled experience: one module's preallocated time-major [T, C] columns.

Every batch a runner returns is, per module, a dict of arrays shaped [T, C, ...]: column c is
one sub-env's (single-agent) or one (sub-env, agent) slot's (multi-agent) steps in order, one
episode after another. `ModuleColumns` allocates those arrays once per sample() call from the
module's layout (observation shape, action shape and dtype, recurrent state, extra columns),
grows them along time when a call runs longer than planned, and cuts out the batch.

Two ways of writing, one layout:
- lockstep: every column steps each row (a vector of single-agent envs, simultaneous agents):
  the sampling loop writes row t of all columns at once (`arrays[key][t] = ...`);
- ragged: columns step on their own (turn-based agents, agents that leave early): a column's
  next row is opened when its agent acts (`open_rows`) and closed when its transition completes
  (`close_rows`); `count[c]` is the number of closed rows of column c, and the rows past it are
  marked False in the `valid` column. A row still open when sample() returns is carried over
  to row 0 of the next call's columns.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns, state_column

#: The columns written when a row is opened (the agent acts); the rest when it is closed.
ACT_COLUMNS = (Columns.OBS, Columns.ACTIONS, Columns.ACTION_LOGP, Columns.ACTION_DIST_INPUTS)


class ModuleColumns:
    """One module's [T, C] batch columns.

    Args:
        obs_shape: the (preprocessed) observation shape.
        act_shape: the batch's action shape (after [T, C]).
        act_dtype: the batch's action dtype.
        state_shapes: {name: shape} of a recurrent module's state ({} for feed-forward ones).
        extra: {column: dtype} of further per-row columns written when a row is opened (e.g.
            eps_id and t of the env step each row acted in).
        ragged: whether columns are written row by row on their own (else the caller writes
            whole rows: lockstep).
    """

    def __init__(self, obs_shape: tuple, act_shape: tuple, act_dtype: Any,
                 state_shapes: dict[str, tuple] | None = None, extra: dict[str, Any] | None = None,
                 ragged: bool = False):
        self.ragged = ragged
        self._specs: dict[str, tuple[tuple, Any]] = {
            Columns.OBS: (tuple(obs_shape), np.float32),
            Columns.NEXT_OBS: (tuple(obs_shape), np.float32),
            Columns.ACTIONS: (tuple(act_shape), act_dtype),
            Columns.REWARDS: ((), np.float32),
            Columns.TERMINATEDS: ((), bool),
            Columns.TRUNCATEDS: ((), bool),
            Columns.ACTION_LOGP: ((), np.float32),
            Columns.VALID: ((), bool),
            # A recurrent module's state before each step (the Learner starts its sequences there).
            **{state_column(k): (tuple(shape), np.float32) for k, shape in (state_shapes or {}).items()},
            **{k: ((), dtype) for k, dtype in (extra or {}).items()},
        }
        #: The columns written when a row opens (carried over when sample() returns mid-transition).
        self.act_columns = [*ACT_COLUMNS, *(k for k in self._specs if k.startswith(Columns.STATE_IN + "/")),
                            *(extra or {})]
        self._dist_shape: tuple | None = None  # known from the module's first forward pass
        self.arrays: dict[str, np.ndarray] = {}
        self.T = 0
        self.C = 0
        #: Closed rows per column (ragged writing).
        self.count = np.zeros(0, np.int64)
        #: Whether a column has a row open (its agent acted; the transition is not complete).
        self.open = np.zeros(0, bool)
        #: Each row's episode (ragged writing): what on_postprocess_trajectory and partial fragments read.
        self.episodes = np.empty((0, 0), dtype=object)
        #: The order in which columns closed their first row (-1: none yet); batches hold the columns
        #: that closed a row, in that order.
        self.rank = np.zeros(0, np.int64)
        self._ranked = 0
        self._carry: dict[int, dict[str, Any]] = {}

    # ------------------------------------------------------------------ allocation

    def alloc(self, T: int, C: int) -> dict[str, np.ndarray]:
        """Fresh zeroed columns for T rows of C columns (open rows carried over land in row 0)."""
        self.T, self.C = int(T), int(C)
        self.arrays = {k: np.zeros((self.T, self.C) + shape, dtype) for k, (shape, dtype) in self._specs.items()}
        if self._dist_shape is not None:
            self.arrays[Columns.ACTION_DIST_INPUTS] = np.zeros((self.T, self.C) + self._dist_shape, np.float32)
        opened, ranks = self.open, self.rank
        self.count = np.zeros(self.C, np.int64)
        self.open = np.zeros(self.C, bool)
        self.open[:len(opened)] = opened
        self.rank = np.full(self.C, -1, np.int64)
        self.rank[:len(ranks)] = ranks
        self.episodes = np.empty((self.T, self.C) if self.ragged else (0, 0), dtype=object)
        for c, row in self._carry.items():
            for key, value in row.items():
                if key == "episode":
                    self.episodes[0, c] = value
                elif key in self.arrays:
                    self.arrays[key][0, c] = value
        self._carry = {}
        return self.arrays

    def set_dist_width(self, dist_inputs: np.ndarray) -> np.ndarray:
        """The action_dist_inputs column, allocated at the module's first forward pass (when its
        width is known)."""
        column = self.arrays.get(Columns.ACTION_DIST_INPUTS)
        if column is None:
            self._dist_shape = tuple(dist_inputs.shape[1:])
            column = self.arrays[Columns.ACTION_DIST_INPUTS] = np.zeros((self.T, self.C) + self._dist_shape,
                                                                         np.float32)
        return column

    def grow_time(self, T: int) -> dict[str, np.ndarray]:
        """Room for T rows (the filled rows kept)."""
        self.arrays = {k: _grown(v, 0, T) for k, v in self.arrays.items()}
        if self.ragged:
            self.episodes = _grown(self.episodes, 0, T)
        self.T = int(T)
        return self.arrays

    def grow_columns(self, C: int) -> None:
        """Room for C columns (new columns empty)."""
        self.arrays = {k: _grown(v, 1, C) for k, v in self.arrays.items()}
        self.episodes = _grown(self.episodes, 1, C)
        self.count = np.concatenate([self.count, np.zeros(C - self.C, np.int64)])
        self.open = np.concatenate([self.open, np.zeros(C - self.C, bool)])
        self.rank = np.concatenate([self.rank, np.full(C - self.C, -1, np.int64)])
        self.C = int(C)

    # ------------------------------------------------------------------ ragged writing

    def open_rows(self, cols: np.ndarray) -> np.ndarray:
        """Open the next row of each of `cols` (their agents act now); the rows, for writing the
        act-time columns. Grows the columns along time when one is full."""
        rows = self.count[cols]
        if len(rows) and int(rows.max()) >= self.T:
            self.grow_time(max(2 * self.T, int(rows.max()) + 1))
        self.open[cols] = True
        return rows

    def close_rows(self, cols: np.ndarray, next_obs: np.ndarray, rewards: Any, terminateds: Any,
                   truncateds: Any) -> None:
        """Complete the open row of each of `cols` (their transitions ended: the agents observed
        again, or are done)."""
        rows = self.count[cols]
        arrays = self.arrays
        arrays[Columns.NEXT_OBS][rows, cols] = next_obs
        arrays[Columns.REWARDS][rows, cols] = rewards
        arrays[Columns.TERMINATEDS][rows, cols] = terminateds
        arrays[Columns.TRUNCATEDS][rows, cols] = truncateds
        arrays[Columns.VALID][rows, cols] = True
        self.count[cols] = rows + 1
        self.open[cols] = False
        if self._ranked >= self.C:  # every column closed a row before: the order is known
            return
        first = cols[self.rank[cols] < 0]
        if len(first):
            self.rank[first] = np.arange(self._ranked, self._ranked + len(first))
            self._ranked += len(first)

    def last_closed_rows(self, cols: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of the last closed row of those of `cols` that have one in this call."""
        cols_arr = np.asarray(cols, np.int64)
        cols_arr = cols_arr[self.count[cols_arr] > 0]
        return self.count[cols_arr] - 1, cols_arr

    # ------------------------------------------------------------------ the batch

    def take(self, T: int) -> dict[str, np.ndarray]:
        """The first T rows of every column (views), as the lockstep loop filled them."""
        return {k: v[:T] for k, v in self.arrays.items()}

    def take_closed(self) -> "ClosedRows":
        """The closed rows of every column that ever closed one (ragged writing), in the order
        they first did: [max(count), C'] arrays, zeros past a column's closed rows. Rows still open
        are kept aside for the next alloc()."""
        T = int(self.count.max()) if self.C else 0
        open_cols = np.flatnonzero(self.open)
        rows = self.count[open_cols]
        for c, r in zip(open_cols.tolist(), rows.tolist()):
            carried = {key: _copy(self.arrays[key][r, c]) for key in self.act_columns if key in self.arrays}
            carried["episode"] = self.episodes[r, c]
            self._carry[c] = carried
        inside = rows < T  # open rows within the batch's rows are zeroed (the batch holds closed rows only)
        batch = {k: v[:T] for k, v in self.arrays.items()}
        if inside.any():
            for v in batch.values():
                v[rows[inside], open_cols[inside]] = 0
        ranked = np.flatnonzero(self.rank >= 0)
        order = ranked[np.argsort(self.rank[ranked], kind="stable")]
        episodes = self.episodes[:T]
        if len(order) != self.C or (order != np.arange(self.C)).any():
            batch = {k: v[:, order] for k, v in batch.items()}
            episodes = episodes[:, order]
        return ClosedRows(batch, order, self.count[order], episodes)

    def drop_open(self, cols: list[int]) -> None:
        """Abandon the open rows of `cols` (their sub-env was rebuilt: the transitions never end)."""
        self.open[np.asarray(cols, np.int64)] = False


class ClosedRows:
    """What `ModuleColumns.take_closed` cut out: the batch, the (internal) column of each of its
    columns, each one's number of rows and the rows' episodes."""

    __slots__ = ("batch", "columns", "count", "episodes")

    def __init__(self, batch: dict[str, np.ndarray], columns: np.ndarray, count: np.ndarray, episodes: np.ndarray):
        self.batch, self.columns, self.count, self.episodes = batch, columns, count, episodes


def _grown(array: np.ndarray, axis: int, size: int) -> np.ndarray:
    shape = list(array.shape)
    shape[axis] = size
    out = np.zeros(shape, array.dtype) if array.dtype != object else np.empty(shape, dtype=object)
    index = tuple(slice(0, n) for n in array.shape)
    out[index] = array
    return out


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value
