"""Replay of fixed-length sequences with the recurrent state at their start (R2D2's stored state).

`SequenceReplayBuffer.add()` takes the EnvRunner's time-major batches `[T, B, ...]` and follows
each sub-env (lane) across adds. A lane's steps are cut into sequences of at most `max_seq_len`
steps, ending early at an episode end. With `burn_in_len = K > 0`, a sequence that continues an
episode starts with the last K steps of the one before (its burn-in: replayed only to warm up the
state from the stored one, never trained on), so every step is trained on exactly once; an
episode's first sequence starts from the exact initial state and needs no burn-in.

Each stored sequence (one row of the underlying uniform or prioritized `ReplayBuffer`, whose ring,
sampling, priorities and `get_state` it reuses) holds, zero-padded to `max_seq_len = L`:

- `obs` [L + 1, ...]: the steps' observations, then the observation after the last real step
  (at index `seq_lens`), so one unroll gives Q(o_t) and the bootstrap Q(o_{t+n});
- `actions` [L, ...], `rewards` [L];
- `terminateds` (scalar): whether the last real step ended the episode by termination;
- `seq_lens` (int): real steps; `burn_in` (int): leading burn-in steps (0 or K);
- `loss_mask` [L] (bool): the real steps after the burn-in, the ones the loss counts;
- `state_in/<k>` [...]: the module state before the sequence's first step.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError
from rlx.utils.replay_buffers.prioritized_replay_buffer import PrioritizedReplayBuffer
from rlx.utils.replay_buffers.replay_buffer import ReplayBuffer

SEQ_LENS = "seq_lens"
BURN_IN = "burn_in"
STATE_PREFIX = f"{Columns.STATE_IN}/"
#: Time-major batch columns a sequence is built from (plus the `state_in/<k>` ones).
_STEP_COLUMNS = (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS)


class _Lane:
    """The steps of one sub-env's current (not yet stored) sequence."""

    def __init__(self, length: int, templates: dict[str, np.ndarray]):
        self.steps = {k: np.zeros((length,) + v.shape, v.dtype) for k, v in templates.items()}
        self.count = 0
        self.burn_in = 0


class SequenceReplayBuffer:
    """Replay buffer of `max_seq_len`-step sequences with stored start state (see module docstring).

    Args:
        store: the row buffer that keeps one sequence per row (a ReplayBuffer or a
            PrioritizedReplayBuffer; its capacity counts sequences).
        max_seq_len: steps per stored sequence, burn-in included.
        burn_in_len: leading steps of a continuing sequence replayed only to warm up the state.
    """

    def __init__(self, store: ReplayBuffer, max_seq_len: int, burn_in_len: int = 0):
        if not 0 <= burn_in_len < max_seq_len:
            raise ConfigError(f"burn_in_len ({burn_in_len}) must be >= 0 and smaller than max_seq_len "
                              f"({max_seq_len}): each sequence needs steps to train on after its burn-in.")
        self.store = store
        self.max_seq_len = int(max_seq_len)
        self.burn_in_len = int(burn_in_len)
        self._lanes: dict[int, _Lane] = {}
        self._pending: list[dict[str, np.ndarray]] = []

    @property
    def prioritized(self) -> bool:
        """Whether sequences are drawn by priority (and `update_priorities` applies)."""
        return isinstance(self.store, PrioritizedReplayBuffer)

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(sequences={len(self)}, max_seq_len={self.max_seq_len}, "
                f"burn_in_len={self.burn_in_len}, store={type(self.store).__name__})")

    def stats(self) -> dict[str, Any]:
        """The row store's stats (sizes count sequences) plus max_seq_len and burn_in_len."""
        return {**self.store.stats(), "max_seq_len": self.max_seq_len, "burn_in_len": self.burn_in_len}

    # ------------------------------------------------------------------ adding

    def add(self, batch: Mapping[str, np.ndarray], time_major: bool = True, lane_offset: int = 0) -> None:
        """Cut an EnvRunner's time-major batch into sequences; store the finished ones.

        Sub-env `b` is lane `lane_offset + b`; a lane's unfinished sequence continues with its
        next add. Rows whose `valid` is False (dropped steps) end the lane's sequence there.
        """
        if not time_major:
            raise ValueError("SequenceReplayBuffer.add() needs the EnvRunner's time-major [T, B, ...] batches.")
        missing = [k for k in _STEP_COLUMNS + (Columns.TERMINATEDS, Columns.TRUNCATEDS) if k not in batch]
        state_keys = [k for k in batch if k.startswith(STATE_PREFIX)]
        if missing or not state_keys:
            raise ValueError(f"sequence replay needs the columns {list(_STEP_COLUMNS)}, terminateds, truncateds and "
                             f"the recurrent state ('state_in/<k>'); the batch lacks "
                             f"{missing + ([] if state_keys else ['state_in/<k>'])}.")
        cols = {k: np.asarray(batch[k]) for k in _STEP_COLUMNS + tuple(state_keys)}
        T, B = cols[Columns.REWARDS].shape[:2]
        terminated = np.asarray(batch[Columns.TERMINATEDS], bool)
        ends = terminated | np.asarray(batch[Columns.TRUNCATEDS], bool)
        valid = np.asarray(batch[Columns.VALID], bool) if Columns.VALID in batch else np.ones((T, B), bool)
        for b in range(B):
            key = int(lane_offset) + b
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane(self.max_seq_len, {k: v[0, b] for k, v in cols.items()})
            # Copy runs of steps at once: a run stops after an episode end, before an invalid
            # row, or where the lane's sequence is full.
            cuts = np.flatnonzero(ends[:, b] | ~valid[:, b])
            t = 0
            while t < T:
                if not valid[t, b]:
                    self._flush(lane, terminated=False)
                    t += 1
                    continue
                stop = t + min(T - t, self.max_seq_len - lane.count)
                nxt = cuts[np.searchsorted(cuts, t):]
                if nxt.size and nxt[0] < stop:
                    stop = int(nxt[0]) + 1 if valid[nxt[0], b] else int(nxt[0])
                n = stop - t
                for k, v in cols.items():
                    lane.steps[k][lane.count:lane.count + n] = v[t:stop, b]
                lane.count += n
                t = stop
                if ends[stop - 1, b]:
                    self._flush(lane, terminated=bool(terminated[stop - 1, b]))
                elif lane.count == self.max_seq_len:
                    self._flush(lane, terminated=False, carry=self.burn_in_len)
        if self._pending:
            rows = {k: np.stack([p[k] for p in self._pending]) for k in self._pending[0]}
            self._pending.clear()
            self.store.add(rows)

    def end_open_episodes(self) -> None:
        """Store every lane's unfinished sequence as it is (its episode continues in no later add).

        Call it when the env runners restart their episodes, as for ReplayBuffer.
        """
        for lane in self._lanes.values():
            self._flush(lane, terminated=False)
        if self._pending:
            rows = {k: np.stack([p[k] for p in self._pending]) for k in self._pending[0]}
            self._pending.clear()
            self.store.add(rows)

    def _flush(self, lane: _Lane, terminated: bool, carry: int = 0) -> None:
        """Queue the lane's steps as one sequence (unless all are burn-in) and restart the lane,
        keeping its last `carry` steps as the next sequence's burn-in."""
        n, L = lane.count, self.max_seq_len
        if n > lane.burn_in:
            steps = lane.steps
            obs = np.zeros((L + 1,) + steps[Columns.OBS].shape[1:], steps[Columns.OBS].dtype)
            obs[:n] = steps[Columns.OBS][:n]
            obs[n] = steps[Columns.NEXT_OBS][n - 1]
            row: dict[str, np.ndarray] = {Columns.OBS: obs}
            for k in (Columns.ACTIONS, Columns.REWARDS):
                padded = np.zeros_like(steps[k])
                padded[:n] = steps[k][:n]
                row[k] = padded
            row[Columns.TERMINATEDS] = np.asarray(terminated)
            row[SEQ_LENS] = np.asarray(n, np.int64)
            row[BURN_IN] = np.asarray(lane.burn_in, np.int64)
            mask = np.zeros(L, bool)
            mask[lane.burn_in:n] = True
            row[Columns.LOSS_MASK] = mask
            for k, v in steps.items():
                if k.startswith(STATE_PREFIX):
                    row[k] = v[0].copy()
            self._pending.append(row)
        if carry and n >= carry:
            for v in lane.steps.values():
                v[:carry] = v[n - carry:n]
            lane.count = lane.burn_in = carry
        else:
            lane.count = lane.burn_in = 0

    # ------------------------------------------------------------------ sampling

    def sample(self, num_items: int, *, n_step: int = 1, gamma: float = 0.99,
               beta: float | None = None) -> dict[str, np.ndarray]:
        """Draw sequences holding about `num_items` env steps: ceil(num_items / max_seq_len) of them
        (train_batch_size counts steps, as RLlib's R2D2 counts it).

        Returns the stored columns [N, ...] plus `weights`, `batch_indexes` (for
        `update_priorities`) and `n_step` (the requested n for every sequence: the learner builds
        n-step targets inside each sequence; `gamma` is the learner's).
        """
        if isinstance(num_items, bool) or int(num_items) != num_items or num_items < 1:
            raise ValueError(f"num_items must be a positive int, got {num_items!r}.")
        if isinstance(n_step, bool) or int(n_step) != n_step or n_step < 1:
            raise ValueError(f"n_step must be a positive int, got {n_step!r}.")
        num_seqs = -(-int(num_items) // self.max_seq_len)
        out = self.store.sample(num_seqs, n_step=1, beta=beta)
        out["n_step"] = np.full(num_seqs, int(n_step), np.int64)
        return out

    def update_priorities(self, batch_indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set sampled sequences' priorities (R2D2: eta * max|td| + (1 - eta) * mean|td|, which the
        recurrent DQN learner returns as `td_error`); only for a prioritized store."""
        if not self.prioritized:
            raise TypeError(f"{type(self.store).__name__} has no priorities; use a prioritized replay buffer type.")
        self.store.update_priorities(batch_indexes, priorities)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """The stored sequences (the row store's state); lanes' unfinished sequences are not kept."""
        return self.store.get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore `get_state()`; unfinished sequences are dropped (new episodes start after a restore)."""
        self.store.set_state(state)
        self._lanes.clear()
        self._pending.clear()
