"""One batch as one JSON object: RLlib's line format of offline files.

A single-agent line is `{"type": "SampleBatch", "<column>": [...], ...}`; a multi-agent line
is `{"type": "MultiAgentBatch", "count": <env steps>, "policy_batches": {"<policy id>":
{"<column>": [...], ...}, ...}}`. A column is a JSON list of row values, or a compressed
string (rlx.offline.compression) for the columns named in `output_compress_columns`.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable

import numpy as np

from rlx.core.columns import Columns
from rlx.offline.compression import CompressedColumnError, pack, unpack_if_needed
from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, batch_kind


class BatchFormatError(ValueError):
    """A record of an offline file is not a batch rlx can read."""


def to_json(batch: Any, compress_columns: Iterable[str] = ()) -> str:
    """One line of JSON (no newline) holding a flat SampleBatch or MultiAgentBatch. Float32
    columns are written with the 9 significant digits float32 needs to read back exactly (not
    the 17 digits of the float64 they would become)."""
    compress = frozenset(compress_columns)
    if batch_kind(batch) is MultiAgentBatch:  # the record's "type"
        inner = ", ".join(f"{json.dumps(str(pid))}: {_columns_text(b, compress)}"
                          for pid, b in batch.policy_batches.items())
        return f'{{"type": "MultiAgentBatch", "count": {int(batch.env_steps())}, "policy_batches": {{{inner}}}}}'
    body = _columns_text(batch, compress)
    return '{"type": "SampleBatch"' + (", " + body[1:] if len(body) > 2 else "}")


def _columns_text(batch: Any, compress: frozenset) -> str:
    parts = []
    obs_rows: tuple[np.ndarray, list[str]] | None = None
    for name, value in batch.items():
        value = np.asarray(value) if not isinstance(value, np.ndarray) else value
        if name in compress and value.dtype.kind in "biuf":
            text = json.dumps(pack(value))
        elif value.ndim == 2 and _plain_float32(value) and name in (Columns.OBS, Columns.NEXT_OBS):
            # new_obs repeats obs one row later (except at episode ends): reuse those rows' text.
            rows = _float32_rows(value, obs_rows if name == Columns.NEXT_OBS else None)
            if name == Columns.OBS:
                obs_rows = (value, rows)
            text = "[" + ",".join(rows) + "]"
        else:
            text = _array_text(value)
        parts.append(f"{json.dumps(str(name))}: {text}")
    return "{" + ", ".join(parts) + "}"


def _array_text(value: np.ndarray) -> str:
    """The JSON list of an array's rows."""
    if _plain_float32(value):
        if value.ndim == 1:
            return "[" + _float32_values(value) + "]"
        return "[" + ",".join(_float32_rows(value)) + "]"
    return json.dumps(value.tolist(), default=_fallback, allow_nan=True)


def _plain_float32(value: np.ndarray) -> bool:
    return value.dtype == np.float32 and value.ndim in (1, 2) and value.size > 0 and bool(np.isfinite(value).all())


def _whole(value: np.ndarray) -> bool:
    return bool(np.all(value == np.round(value))) and float(np.abs(value).max()) < 2.0 ** 53


def _float32_values(value: np.ndarray) -> str:
    """The values of a finite float32 array, comma-separated, each with the 9 significant digits
    any float32 needs to read back exactly (one C-level %-format of the whole array, several
    times faster than the shortest form). Whole numbers are written as 1.0, 2.0, ... so they read
    back as floats."""
    flat = value.reshape(-1)
    if _whole(flat):
        return ",".join(np.char.add(flat.astype(np.int64).astype(str), ".0").tolist())
    return _template(flat.size, 0) % tuple(flat.tolist())


def _float32_rows(value: np.ndarray, previous: tuple[np.ndarray, list[str]] | None = None) -> list[str]:
    """The JSON text of each row of a finite 2-D float32 array (values as in `_float32_values`).
    `previous` = (an array of the same shape, its rows' text): rows equal to that array's next
    row take its text instead of being formatted again."""
    n, width = value.shape
    if _whole(value):
        return ["[" + _float32_values(row) + "]" for row in value]
    if previous is None or previous[0].shape != value.shape or n < 2:
        return (_template(n, width) % tuple(value.reshape(-1).tolist())).split("\x00")
    prev_values, prev_rows = previous
    reuse = np.zeros(n, dtype=bool)
    reuse[:-1] = (value[:-1] == prev_values[1:]).all(axis=1)
    rows = prev_rows[1:] + [""]
    todo = np.flatnonzero(~reuse)
    fresh = (_template(len(todo), width) % tuple(value[todo].reshape(-1).tolist())).split("\x00")
    for index, text in zip(todo.tolist(), fresh):
        rows[index] = text
    return rows


_TEMPLATES: dict[tuple[int, int], str] = {}


def _template(rows: int, width: int) -> str:
    """A %-format of `rows` rows of `width` values (width 0: `rows` values joined by commas;
    otherwise each row as a JSON list, rows separated by NUL for splitting)."""
    key = (rows, width)
    template = _TEMPLATES.get(key)
    if template is None:
        if width == 0:
            template = ",".join(["%.9g"] * rows)
        else:
            template = "\x00".join(["[" + ",".join(["%.9g"] * width) + "]"] * rows)
        if len(_TEMPLATES) > 64:
            _TEMPLATES.clear()
        _TEMPLATES[key] = template
    return template


def _fallback(value: Any) -> Any:
    """JSON for what json cannot encode itself (NumPy scalars and arrays inside infos, ...)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


def from_json_dict(data: Any) -> Any:
    """The SampleBatch (or MultiAgentBatch of SampleBatches) a decoded JSON record holds.
    BatchFormatError says what is wrong with a record that is not one."""
    if not isinstance(data, dict):
        raise BatchFormatError(f"a record must be a JSON object, got {type(data).__name__}.")
    kind = data.get("type")
    if kind == "SampleBatch":
        return _sample_batch({k: v for k, v in data.items() if k != "type"}, "")
    if kind == "MultiAgentBatch":
        policy_batches = data.get("policy_batches")
        if not isinstance(policy_batches, dict) or not policy_batches:
            raise BatchFormatError("a MultiAgentBatch record needs a non-empty 'policy_batches' object.")
        batches = {str(pid): _sample_batch(cols, f"policy {pid!r}: ") for pid, cols in policy_batches.items()}
        count = data.get("count")
        if isinstance(count, bool) or not isinstance(count, (int, float)) or not math.isfinite(count) or count < 0:
            count = max(b.count for b in batches.values())
        return MultiAgentBatch(batches, int(count))
    if kind is None:
        raise BatchFormatError("the record has no 'type' field (it must be 'SampleBatch' or 'MultiAgentBatch').")
    raise BatchFormatError(f"unknown record type {kind!r}; expected 'SampleBatch' or 'MultiAgentBatch'.")


def _sample_batch(columns: Any, where: str) -> SampleBatch:
    if not isinstance(columns, dict):
        raise BatchFormatError(f"{where}the columns must be a JSON object, got {type(columns).__name__}.")
    out = SampleBatch()
    for name, value in columns.items():
        if name == "dones":  # the old name of terminateds
            name = Columns.TERMINATEDS
        try:
            value = unpack_if_needed(value)
        except CompressedColumnError as err:
            raise BatchFormatError(f"{where}column {name!r}: {err}") from None
        out[name] = _column_array(name, value, where)
    lengths = {name: len(value) for name, value in out.items()}
    if len(set(lengths.values())) > 1:
        raise BatchFormatError(f"{where}columns have different numbers of rows: "
                               + ", ".join(f"{k}={n}" for k, n in lengths.items()) + ".")
    return out


def _column_array(name: str, value: Any, where: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, list):
        if name == Columns.INFOS:
            array = np.empty(len(value), dtype=object)
            array[:] = value
            return array
        try:
            array = np.asarray(value)
        except ValueError as err:  # ragged rows
            raise BatchFormatError(f"{where}column {name!r} has rows of different shapes ({err}).") from None
    else:
        raise BatchFormatError(f"{where}column {name!r} must be a list of rows, got {type(value).__name__}.")
    if array.ndim == 0:
        raise BatchFormatError(f"{where}column {name!r} must be a list of rows, got a single value.")
    return array
