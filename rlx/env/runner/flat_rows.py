"""Sampled time-major batches as RLlib's flat rows (SampleBatch), and flat rows back as time-major ones.

EnvRunners fill `[T, B, ...]` arrays: column b is sub-env b's steps in order, several
episodes one after the other. RLlib's old API stack (a RolloutWorker's `sample()`, offline
files) holds flat rows instead, each episode's steps together, and names every row's episode
(`eps_id`) and step in it (`t`). `to_sample_batch` makes the flat rows of a sampled batch (an
`EpisodeTracker` carries each column's open episode from one batch to the next, so an episode
cut by the end of a batch keeps its id in the next one); `to_time_major` packs flat rows
(episode fragments) back into the `[T, B]` columns rlx's Learners train on.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, batch_kind

EPS_ID = "eps_id"
T = "t"
AGENT_INDEX = "agent_index"
UNROLL_ID = "unroll_id"
ACTION_PROB = "action_prob"

#: Columns of a sampled batch that are bookkeeping, not data.
_NOT_WRITTEN = (Columns.VALID,)


class EpisodeTracker:
    """The open episode (id, next step index) of every column of sampled batches.

    Columns are keyed by (policy id, column index). `reset()` forgets them all (the runners
    restarted their episodes); a key whose batch width changed starts fresh too.
    """

    def __init__(self, seed: int | None = None):
        rng = np.random.default_rng(seed)
        # Episode ids count up from a random start, so files of different runs rarely share ids.
        self._next_id = int(rng.integers(1, 2**52))
        self._open: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.unroll_id = 0

    def reset(self) -> None:
        """Start a fresh episode in every column."""
        self._open.clear()

    def new_ids(self, count: int) -> int:
        """Reserve `count` consecutive episode ids; returns the first."""
        first = self._next_id
        self._next_id += count
        return first

    def columns(self, key: str, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(episode id, next t, has an open episode) arrays of the `width` columns of `key`."""
        state = self._open.get(key)
        if state is None or state[0].shape[0] != width:
            state = (np.zeros(width, np.int64), np.zeros(width, np.int64), np.zeros(width, bool))
            self._open[key] = state
        return state


def to_sample_batch(batch: Any, tracker: EpisodeTracker, key: str = "") -> Any:
    """The flat SampleBatch (MultiAgentBatch of them) of a sampled time-major batch.

    Rows are grouped by column (each episode's steps together, in order); rows marked
    invalid are left out. Adds `eps_id`, `t`, `agent_index` (0 single-agent; the agent's
    column in its policy's batch multi-agent), `unroll_id` (one per sampled batch) and
    `action_prob` (from `action_logp`). `key` tells apart batches whose columns are different
    sub-envs (those of different runners, sampled asynchronously).
    """
    unroll_id = tracker.unroll_id
    tracker.unroll_id += 1
    if batch_kind(batch) is SampleBatch:  # a single-agent runner's [T, B] columns: one agent per column
        return _flatten(dict(batch), tracker, f"{key}default_policy", unroll_id, per_column_agents=False)
    policy_batches: dict[str, Any] = {pid: _flatten(dict(b), tracker, f"{key}policy:{pid}", unroll_id, per_column_agents=True)
                      for pid, b in batch.policy_batches.items()}
    return MultiAgentBatch(policy_batches, batch.env_steps(), batch.agent_steps())


def _flatten(batch: dict[str, np.ndarray], tracker: EpisodeTracker, key: str, unroll_id: int,
             per_column_agents: bool) -> SampleBatch:
    rewards = batch[Columns.REWARDS]
    T_, B = rewards.shape[:2]
    valid = batch.get(Columns.VALID)
    dones = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
    eps_id_open, t_open, has_open = tracker.columns(key, B)
    eps_parts, t_parts, agent_parts = [], [], []
    for b in range(B):
        rows = np.flatnonzero(valid[:, b]) if valid is not None else None
        done = dones[rows, b] if rows is not None else dones[:, b]
        n = done.shape[0]
        if n == 0:
            continue
        # A row starts an episode after a done row, or at the top when no episode is open.
        starts = np.empty(n, bool)
        starts[0] = not has_open[b]
        starts[1:] = done[:-1]
        number = np.cumsum(starts)  # 0: the episode that was open before this batch
        new = int(number[-1])
        first = tracker.new_ids(new) if new else 0
        eps = np.where(number == 0, eps_id_open[b], first + number - 1)
        position = np.arange(n)
        last_start = np.maximum.accumulate(np.where(starts, position, -1))
        steps = np.where(last_start < 0, t_open[b] + position, position - last_start)
        eps_parts.append(eps)
        t_parts.append(steps)
        agent_parts.append(np.full(n, b if per_column_agents else 0, np.int64))
        has_open[b] = not done[-1]
        eps_id_open[b] = eps[-1]
        t_open[b] = steps[-1] + 1
    keep = None if valid is None else valid.T.reshape(-1)
    out = SampleBatch()
    for name, column in batch.items():
        if name in _NOT_WRITTEN:
            continue
        rows = np.swapaxes(column, 0, 1).reshape((T_ * B,) + column.shape[2:])
        out[name] = rows if keep is None else rows[keep]
    empty = np.zeros(0, np.int64)
    out[EPS_ID] = np.concatenate(eps_parts) if eps_parts else empty
    out[T] = np.concatenate(t_parts) if t_parts else empty
    out[AGENT_INDEX] = np.concatenate(agent_parts) if agent_parts else empty
    out[UNROLL_ID] = np.full(out[EPS_ID].shape[0], unroll_id, np.int64)
    if Columns.ACTION_LOGP in out:
        out[ACTION_PROB] = np.exp(out[Columns.ACTION_LOGP])
    return out


#: Columns of flat rows that are bookkeeping (episode ids, step indices), not training data.
BOOKKEEPING_COLUMNS = frozenset({EPS_ID, T, AGENT_INDEX, UNROLL_ID, ACTION_PROB, "env_id", "infos", "dones"})
#: Columns of a fragment packing aims for (longer fragments make longer columns).
TARGET_COLUMNS = 16


def is_flat(batch: Any) -> bool:
    """Whether `batch` (a dict of columns) is flat rows (1-d rewards), not a time-major [T, B] batch."""
    rewards = batch.get(Columns.REWARDS)
    return rewards is not None and np.ndim(rewards) == 1


def training_columns(rows: Any) -> dict[str, np.ndarray]:
    """The data columns of flat rows: every numeric column but the bookkeeping ones."""
    out = {}
    for name, values in rows.items():
        if name in BOOKKEEPING_COLUMNS or name == Columns.VALID:
            continue
        array = np.asarray(values)
        if array.dtype != object:
            out[name] = array
    return out


def to_time_major(rows: Any) -> dict[str, np.ndarray]:
    """Flat rows (a SampleBatch, e.g. from a RolloutWorker's `sample()`) as a time-major [T, B] batch.

    Each episode fragment (rows of one `eps_id`/`agent_index`, ended by a terminated or
    truncated row) becomes a stretch of one column, packed one after the other; rows no
    fragment fills are marked invalid. A fragment that ends without its episode ending gets
    `truncateds=True` on its last row, so a Learner bootstraps from its last `new_obs` there.
    Bookkeeping columns (`eps_id`, `t`, ...) are left out.
    """
    starts, lengths = fragment_bounds(rows)
    columns = training_columns(rows)
    n = int(lengths.sum())
    if n == 0:
        raise ValueError("The batch has no rows to train on.")
    T_, B, col_of, off_of = pack_fragments(lengths)
    frag = np.repeat(np.arange(len(lengths)), lengths)
    t_idx = off_of[frag] + (np.arange(n) - starts[frag])
    b_idx = col_of[frag]
    out = {}
    for name, values in columns.items():
        array = np.zeros((T_, B) + values.shape[1:], values.dtype)
        array[t_idx, b_idx] = values
        out[name] = array
    if Columns.TRUNCATEDS not in out:
        out[Columns.TRUNCATEDS] = np.zeros((T_, B), bool)
    last_t, last_b = t_idx[starts + lengths - 1], b_idx[starts + lengths - 1]
    out[Columns.TRUNCATEDS][last_t, last_b] |= ~out[Columns.TERMINATEDS].astype(bool)[last_t, last_b]
    if n < T_ * B:
        valid = np.zeros((T_, B), bool)
        valid[t_idx, b_idx] = True
        out[Columns.VALID] = valid
    return out


def fragment_bounds(columns: Any) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each episode fragment of a flat batch, in row order."""
    n = len(columns[Columns.REWARDS])
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cut = np.zeros(n, bool)  # cut[i]: a new fragment starts at row i
    cut[0] = True
    done = np.asarray(columns[Columns.TERMINATEDS], bool).copy()
    if Columns.TRUNCATEDS in columns:
        done |= np.asarray(columns[Columns.TRUNCATEDS], bool)
    cut[1:] |= done[:-1]
    for key in (EPS_ID, AGENT_INDEX):
        if key in columns:
            ids = np.asarray(columns[key])
            cut[1:] |= ids[1:] != ids[:-1]
    starts = np.flatnonzero(cut)
    lengths = np.diff(np.append(starts, n))
    return starts, lengths


def pack_fragments(lengths: np.ndarray) -> tuple[int, int, np.ndarray, np.ndarray]:
    """(T, B, column, offset) placing fragments one after the other in columns of T rows."""
    total = int(lengths.sum())
    T_ = max(int(lengths.max()), math.ceil(total / TARGET_COLUMNS))
    column = np.zeros(len(lengths), np.int64)
    offset = np.zeros(len(lengths), np.int64)
    b, used = 0, 0
    for i, length in enumerate(lengths.tolist()):
        if used + length > T_:
            b, used = b + 1, 0
        column[i], offset[i] = b, used
        used += length
    return T_, b + 1, column, offset
