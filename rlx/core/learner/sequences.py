"""Time-major train batches cut into sequences, for Learners of recurrent (stateful) modules.

An EnvRunner's batch is [T, B]: B sub-env columns of T steps, with the module's state before
each step in the `state_in/<name>` columns. A recurrent Learner cuts each column into sequences
(after episode ends, before padding rows, and every `max_seq_len` steps), runs the module over
each sequence from the stored state at its first step, and maps the per-step outputs back to the
[T, B] layout. PPO (rlx.algorithms.ppo.recurrent) and IMPALA/APPO share these helpers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns, state_column
from rlx.core.learner.device import module_device, to_device

__all__ = ["SequenceLayout", "Sequences", "cut_sequences", "max_seq_len", "sequence_state_in", "sequence_values"]


@dataclass
class Sequences:
    """Where each sequence's steps are in the [T, B] batch: row/column indices [N, L] (padded
    steps repeat the first one), the real-step mask [N, L] and each sequence's length [N]."""

    t_idx: np.ndarray
    b_idx: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray

    def gather(self, column: np.ndarray) -> np.ndarray:
        """A [T, B, ...] column as [N, L, ...] sequences."""
        return column[self.t_idx, self.b_idx]

    def for_columns(self, columns: np.ndarray) -> tuple["Sequences", np.ndarray]:
        """(the sequences of these batch columns, their indices among self's): column `columns[j]`
        becomes column j, and L shrinks to the longest kept sequence."""
        position = np.full(int(self.b_idx.max(initial=0)) + 1, -1, np.int64)
        position[np.asarray(columns, np.int64)] = np.arange(len(columns))
        keep = np.flatnonzero(position[self.b_idx[:, 0]] >= 0)
        lengths = self.lengths[keep]
        L = int(lengths.max(initial=1))
        return Sequences(self.t_idx[keep, :L], position[self.b_idx[keep, :L]], self.mask[keep, :L], lengths), keep


def max_seq_len(module: Any) -> int:
    """The module's sequence length for training: model_config['max_seq_len'] (20 when unset)."""
    return int((getattr(module, "model_config", None) or {}).get("max_seq_len", 20) or 20)


def cut_sequences(batch: dict[str, np.ndarray], max_seq_len: int) -> Sequences:
    """The sequences of a time-major batch: per column, cut after episode ends, before padding
    rows and every `max_seq_len` steps."""
    rewards = batch[Columns.REWARDS]
    T, B = rewards.shape[:2]
    ends = np.asarray(batch[Columns.TERMINATEDS], bool) | np.asarray(batch[Columns.TRUNCATEDS], bool)
    valid = np.asarray(batch[Columns.VALID], bool) if Columns.VALID in batch else np.ones((T, B), bool)
    starts: list[tuple[int, int, int]] = []  # (column, first row, length)
    for b in range(B):
        t = 0
        while t < T:
            if not valid[t, b]:
                t += 1
                continue
            length = 1
            while (length < max_seq_len and t + length < T and valid[t + length, b]
                   and not ends[t + length - 1, b]):
                length += 1
            starts.append((b, t, length))
            t += length
    L = max(length for _, _, length in starts) if starts else 1
    steps = np.arange(L)
    cols = np.array([s[0] for s in starts], np.int64)
    firsts = np.array([s[1] for s in starts], np.int64)
    lengths = np.array([s[2] for s in starts], np.int64)
    mask = steps[None, :] < lengths[:, None]
    t_idx = np.where(mask, firsts[:, None] + steps[None, :], firsts[:, None])
    b_idx = np.repeat(cols[:, None], L, axis=1)
    return Sequences(t_idx, b_idx, mask, lengths)


def sequence_state_in(batch: dict[str, np.ndarray], seqs: Sequences, keys: list[str]) -> dict[str, np.ndarray]:
    """{state name: [N, ...]}: the state the EnvRunner stored before each sequence's first step."""
    first_t, first_b = seqs.t_idx[:, 0], seqs.b_idx[:, 0]
    return {k: batch[state_column(k)][first_t, first_b] for k in keys}


@torch.no_grad()
def sequence_values(module: Any, batch: dict[str, np.ndarray], seqs: Sequences,
                    state_in: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(V(s_t), V(s_{t+1})) as [T, B]: the module run over each sequence and the observation
    after its last step."""
    obs = seqs.gather(batch[Columns.OBS])
    N, L = seqs.mask.shape
    extended = np.concatenate([obs, np.zeros_like(obs[:, :1])], axis=1)
    last_t = seqs.t_idx[np.arange(N), seqs.lengths - 1]
    extended[np.arange(N), seqs.lengths] = batch[Columns.NEXT_OBS][last_t, seqs.b_idx[:, 0]]
    device = module_device(module)
    out = module.compute_values({
        Columns.OBS: to_device(torch.from_numpy(np.ascontiguousarray(extended, np.float32)), device),
        Columns.STATE_IN: {k: to_device(torch.from_numpy(v), device) for k, v in state_in.items()}})
    values_ext = out.float().cpu().numpy().reshape(N, L + 1)
    T, B = batch[Columns.REWARDS].shape[:2]
    values, next_values = np.zeros((T, B), np.float32), np.zeros((T, B), np.float32)
    m = seqs.mask
    values[seqs.t_idx[m], seqs.b_idx[m]] = values_ext[:, :L][m]
    next_values[seqs.t_idx[m], seqs.b_idx[m]] = values_ext[:, 1:][m]
    return values, next_values


@dataclass
class SequenceLayout:
    """The sequences of a time-major batch with their stored start states as tensors, for a
    Learner that runs the module over [T, B] (mini)batches: `inputs` turns a [T, B, ...]
    observation tensor into the module's sequence batch, `to_time_major` maps [N, L, ...]
    per-step outputs back to flat time-major rows (t * B + b)."""

    seqs: Sequences
    state_in: dict[str, torch.Tensor]
    num_columns: int

    @classmethod
    def of(cls, batch: dict[str, np.ndarray], module: Any, device: torch.device) -> "SequenceLayout":
        """The layout of `batch` for `module` (cut every max_seq_len steps), states on `device`."""
        seqs = cut_sequences(batch, max_seq_len(module))
        state = sequence_state_in(batch, seqs, list(module.get_initial_state()))
        return cls(seqs, {k: torch.from_numpy(np.ascontiguousarray(v, np.float32)).to(device)
                          for k, v in state.items()}, int(batch[Columns.REWARDS].shape[1]))

    def numpy_state_in(self) -> dict[str, np.ndarray]:
        """The start states as NumPy arrays ([N, ...])."""
        return {k: v.cpu().numpy() for k, v in self.state_in.items()}

    def for_columns(self, columns: np.ndarray) -> "SequenceLayout":
        """The layout of a minibatch of these batch columns (in this order)."""
        seqs, keep = self.seqs.for_columns(columns)
        index = torch.as_tensor(keep, dtype=torch.long)
        return SequenceLayout(seqs, {k: v.index_select(0, index.to(v.device)) for k, v in self.state_in.items()},
                              len(columns))

    def inputs(self, obs: torch.Tensor) -> dict[str, Any]:
        """The module's train batch: `obs` [T, B, ...] as [N, L, ...] sequences and `state_in`."""
        t = torch.as_tensor(self.seqs.t_idx, device=obs.device)
        b = torch.as_tensor(self.seqs.b_idx, device=obs.device)
        return {Columns.OBS: obs[t, b], Columns.STATE_IN: self.state_in}

    def to_time_major(self, per_step: torch.Tensor, T: int) -> torch.Tensor:
        """[N, L, ...] per-step outputs as flat time-major rows [T * B, ...] (row t * B + b), with
        gradient; rows of no sequence (padding) are zero and padded sequence steps are dropped."""
        seqs = self.seqs
        rows = torch.as_tensor((seqs.t_idx * self.num_columns + seqs.b_idx)[seqs.mask], device=per_step.device)
        mask = torch.as_tensor(seqs.mask, device=per_step.device)
        out = per_step.new_zeros((T * self.num_columns,) + tuple(per_step.shape[2:]))
        return out.index_put((rows,), per_step[mask])
