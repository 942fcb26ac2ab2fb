"""Flat offline SampleBatches as the time-major `[T, B]` batches rlx's Learners train on.

Each episode fragment of a record (rows with one `eps_id` and `agent_index`, ended by a
terminated or truncated row or by the end of the record) becomes a stretch of one column;
fragments are packed into columns one after the other, and rows no fragment fills are
marked invalid. A fragment that ends without its episode ending gets `truncateds=True` on
its last row, so Learners bootstrap from the value of its last `new_obs` there, as at any
other cut, and never join it to the next fragment in its column.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.env.runner.flat_rows import ACTION_PROB, fragment_bounds
from rlx.env.runner.flat_rows import pack_fragments as _pack
from rlx.offline.spaces import PolicySpaces, policy_batches
from rlx.core.sample_batch import MultiAgentBatch, as_multi_agent

#: Columns of rlx's sampled batches that offline records carry over (when present).
TRAIN_COLUMNS = (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS, Columns.TERMINATEDS,
                 Columns.TRUNCATEDS, Columns.ACTION_LOGP, Columns.ACTION_DIST_INPUTS)
#: Postprocessing results a record may carry (RLlib writes PPO's): kept unless postprocess_inputs.
POSTPROCESSED_COLUMNS = (Columns.ADVANTAGES, Columns.VALUE_TARGETS)


def to_training_batch(batch: Any, spaces: dict[str, PolicySpaces], where: str, *, multi_agent: bool,
                      normalize_actions: bool, keep_postprocessed: bool) -> Any:
    """The time-major batch (a MultiAgentBatch when `multi_agent`) of a checked flat record.

    `normalize_actions`: map Box actions from the env's bounds into [-1, 1] (the module's
    range) for policies whose actions rlx normalizes. `keep_postprocessed`: keep the
    record's advantages/value targets instead of letting the Learner compute them.
    """
    per_policy = policy_batches(batch, spaces, where)
    out = {pid: _time_major(columns, spaces[pid], normalize_actions, keep_postprocessed)
           for pid, columns in per_policy.items()}
    if multi_agent:
        agent_steps = sum(_rows(b) for b in out.values())
        env_steps = as_multi_agent(batch).env_steps()  # (a single-agent record: its rows)
        return MultiAgentBatch(out, env_steps, agent_steps)
    return next(iter(out.values()))


def _rows(batch: dict[str, np.ndarray]) -> int:
    valid = batch.get(Columns.VALID)
    return int(valid.sum()) if valid is not None else int(batch[Columns.REWARDS].size)


def _time_major(columns: Any, spec: PolicySpaces, normalize_actions: bool,
                keep_postprocessed: bool) -> dict[str, np.ndarray]:
    starts, lengths = fragment_bounds(columns)
    n = int(lengths.sum())
    T_, B, col_of, off_of = _pack(lengths) if n else (0, 1, np.zeros(0, np.int64), np.zeros(0, np.int64))
    frag = np.repeat(np.arange(len(lengths)), lengths)
    t_idx = off_of[frag] + (np.arange(n) - starts[frag])
    b_idx = col_of[frag]
    adapter = spec.actions
    flat = _flat_columns(columns, adapter, normalize_actions, keep_postprocessed)
    out = {}
    for name, values in flat.items():
        array = np.zeros((T_, B) + values.shape[1:], values.dtype)
        array[t_idx, b_idx] = values
        out[name] = array
    if n:
        last_t, last_b = t_idx[starts + lengths - 1], b_idx[starts + lengths - 1]
        out[Columns.TRUNCATEDS][last_t, last_b] |= ~out[Columns.TERMINATEDS][last_t, last_b]
    if n < T_ * B:
        valid = np.zeros((T_, B), bool)
        valid[t_idx, b_idx] = True
        out[Columns.VALID] = valid
    return out


def _flat_columns(columns: Any, adapter: Any, normalize_actions: bool,
                  keep_postprocessed: bool) -> dict[str, np.ndarray]:
    """The record's training columns as the dtypes rlx's batches have."""
    n = len(columns[Columns.REWARDS])
    out = {
        Columns.OBS: np.asarray(columns[Columns.OBS], np.float32),
        Columns.NEXT_OBS: np.asarray(columns[Columns.NEXT_OBS], np.float32),
        Columns.REWARDS: np.asarray(columns[Columns.REWARDS], np.float32).reshape(n),
        Columns.TERMINATEDS: np.asarray(columns[Columns.TERMINATEDS], bool).reshape(n),
        Columns.TRUNCATEDS: np.asarray(columns[Columns.TRUNCATEDS], bool).reshape(n) if Columns.TRUNCATEDS in columns
        else np.zeros(n, bool),
    }
    actions = np.asarray(columns[Columns.ACTIONS])
    if normalize_actions and adapter.is_box and adapter.normalize:
        low, high = adapter.low, adapter.high
        actions = 2.0 * (actions.astype(np.float64) - low) / (high - low) - 1.0
    out[Columns.ACTIONS] = actions.astype(adapter.batch_dtype, copy=False)
    if Columns.ACTION_LOGP in columns:
        out[Columns.ACTION_LOGP] = np.asarray(columns[Columns.ACTION_LOGP], np.float32).reshape(n)
    elif ACTION_PROB in columns:
        with np.errstate(divide="ignore"):
            out[Columns.ACTION_LOGP] = np.log(np.asarray(columns[ACTION_PROB], np.float32)).reshape(n)
    if Columns.ACTION_DIST_INPUTS in columns:
        out[Columns.ACTION_DIST_INPUTS] = np.asarray(columns[Columns.ACTION_DIST_INPUTS], np.float32)
    if keep_postprocessed:
        for name in POSTPROCESSED_COLUMNS:
            if name in columns:
                out[name] = np.asarray(columns[name], np.float32).reshape(n)
    return out
