"""Whether the values of an offline record can be trained on, checked per record and column.

The readers check every record they decode (before any worker is known), so a bad value is
reported with the file, line (or row group) and column it came from instead of surfacing as a
NaN loss, a silently wrong episode boundary or a hang several iterations later:

- numbers the Learners train on (observations, rewards, float actions, logits, advantages)
  must be finite once stored as float32 (1e39 is finite in float64 but inf in float32);
- `terminateds` / `truncateds` must be booleans (or 0/1): a string such as "no" would read as
  True;
- episode bookkeeping (`eps_id`, `agent_index`, `unroll_id`) must be integers or strings, and
  `t` whole numbers from -1 on (RLlib's old stack numbers an episode's initial observation -1);
- a MultiAgentBatch that holds rows must count at least one env step.

What fits the Algorithm's spaces (shapes, action ranges) is checked by rlx.offline.spaces.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.core.sample_batch import MultiAgentBatch, batch_kind
from rlx.offline.spaces import OfflineDataError

__all__ = ["FINITE_COLUMNS", "check_record", "record_has_rows"]

#: Columns whose values must be finite as float32 (when present and numeric).
FINITE_COLUMNS = (Columns.OBS, Columns.NEXT_OBS, Columns.REWARDS, Columns.ACTIONS, Columns.ACTION_DIST_INPUTS,
                  Columns.ADVANTAGES, Columns.VALUE_TARGETS)
#: Columns that must hold numbers at all (observations, rewards, the behaviour policy's outputs).
NUMERIC_COLUMNS = FINITE_COLUMNS + (Columns.ACTION_LOGP, "action_prob")
FLAG_COLUMNS = (Columns.TERMINATEDS, Columns.TRUNCATEDS)
ID_COLUMNS = (Columns.EPS_ID, "agent_index", "unroll_id")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def record_has_rows(batch: Any) -> bool:
    """Whether a flat SampleBatch (or MultiAgentBatch of them) holds at least one row."""
    if batch_kind(batch) is MultiAgentBatch:
        return any(len(b) for b in batch.policy_batches.values())
    return bool(len(batch)) if hasattr(batch, "__len__") else True


def check_record(batch: Any, where: str) -> None:
    """Raise OfflineDataError naming `where` and the column when a decoded record holds values
    rlx cannot train on (see the module docstring); a record it can use passes unchanged."""
    if batch_kind(batch) is MultiAgentBatch:
        rows = 0
        for pid, columns in batch.policy_batches.items():
            check_columns(columns, f"{where} (policy {pid!r})")
            rows += len(columns)
        if rows and batch.env_steps() < 1:
            raise OfflineDataError(f"{where}: the MultiAgentBatch's 'count' (env steps) is {batch.env_steps()}, but "
                                   f"its policy batches hold {rows} rows; a record with rows counts at least 1 env "
                                   "step. Fix or drop the record.")
        return
    if isinstance(batch, dict):
        check_columns(batch, where)


def check_columns(columns: Any, where: str) -> None:
    """The column checks of one policy's flat rows (`check_record`)."""
    for name in NUMERIC_COLUMNS:
        if name in columns:
            _check_numbers(name, np.asarray(columns[name]), where)
    for name in FLAG_COLUMNS:
        if name in columns:
            _check_flags(name, np.asarray(columns[name]), where)
    for name in ID_COLUMNS:
        if name in columns:
            _check_ids(name, np.asarray(columns[name]), where)
    if Columns.T in columns:
        _check_steps(np.asarray(columns[Columns.T]), where)


def _sample(values: np.ndarray, bad: np.ndarray) -> str:
    """The first offending value and its row, for messages."""
    flat_bad = bad.reshape(len(bad), -1).any(axis=1) if bad.ndim > 1 else bad
    row = int(np.flatnonzero(flat_bad)[0])
    return f"row {row}: {np.array2string(np.asarray(values[row]).ravel(), threshold=6, precision=4)}"


def _kind_error(name: str, values: np.ndarray, where: str, expected: str) -> OfflineDataError:
    shown = [v for v in values.ravel()[:3].tolist()] if values.size else []
    return OfflineDataError(f"{where}: column {name!r} holds {values.dtype} values (e.g. {shown!r}); it must hold "
                            f"{expected}.")


def _check_numbers(name: str, values: np.ndarray, where: str) -> None:
    if values.dtype.kind not in "biuf":
        raise _kind_error(name, values, where, "numbers")
    if values.dtype.kind != "f" or not values.size:
        return
    with np.errstate(invalid="ignore"):
        # One pass for the usual, good column (max() is NaN when any value is NaN).
        largest = values.max() if name == Columns.ACTION_LOGP else np.abs(values).max()
        if largest <= _FLOAT32_MAX and (name != "action_prob" or values.min() >= 0):
            return
        if name == Columns.ACTION_LOGP:  # log(0) = -inf is a possible log-probability
            bad = np.isnan(values) | (values > _FLOAT32_MAX)
        else:
            bad = ~np.isfinite(values) | (np.abs(values) > _FLOAT32_MAX)
    if bad.any():
        raise OfflineDataError(
            f"{where}: column {name!r} holds {int(bad.sum())} value(s) that are NaN, infinite or beyond float32's "
            f"range (+-3.4e38, where rlx stores them) ({_sample(values, bad)}); it must hold finite numbers. Fix or "
            "drop these rows.")
    negative = values < 0  # (action_prob only)
    raise OfflineDataError(f"{where}: column {name!r} holds {int(negative.sum())} negative value(s) "
                           f"({_sample(values, negative)}); it must hold non-negative numbers (probabilities or "
                           "densities of the actions taken).")


def _check_flags(name: str, values: np.ndarray, where: str) -> None:
    if values.dtype.kind == "b":
        return
    if values.dtype.kind not in "iuf":
        raise _kind_error(name, values, where, "booleans (true/false; a string such as \"no\" would read as True)")
    with np.errstate(invalid="ignore"):
        bad = (values != 0) & (values != 1)
    if bad.any():
        raise OfflineDataError(f"{where}: column {name!r} holds values other than 0 and 1 ({_sample(values, bad)}); "
                               "it must hold booleans (true/false).")


def _check_ids(name: str, values: np.ndarray, where: str) -> None:
    if values.dtype.kind in "iuUS":
        return
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values != np.round(values))
        if not bad.any():
            return
        raise OfflineDataError(f"{where}: column {name!r} holds values that are not whole numbers "
                               f"({_sample(values, bad)}); ids must be integers or strings.")
    raise _kind_error(name, values, where, "integers or strings (one id per row)")


def _check_steps(values: np.ndarray, where: str) -> None:
    name = Columns.T
    if values.dtype.kind not in "iuf":
        raise _kind_error(name, values, where, "whole numbers (each row's step in its episode)")
    if not values.size:
        return
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(values) | (values != np.round(values)) | (values < -1) \
            if values.dtype.kind == "f" else values < -1
    if bad.any():
        raise OfflineDataError(f"{where}: column 't' holds {int(bad.sum())} value(s) that are not whole numbers from "
                               f"-1 on ({_sample(values, bad)}); 't' is each row's step in its episode (0, 1, 2, ...).")
