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
from rlx.policy.sample_batch import MultiAgentBatch, SampleBatch


class BatchFormatError(ValueError):
    """A record of an offline file is not a batch rlx can read."""


def to_json(batch: Any, compress_columns: Iterable[str] = ()) -> str:
    """One line of JSON (no newline) holding a flat SampleBatch or MultiAgentBatch. Float32
    columns are written with the 9 significant digits float32 needs to read back exactly (not
    the 17 digits of the float64 they would become)."""
    compress = frozenset(compress_columns)
    if isinstance(batch, MultiAgentBatch):
        inner = ", ".join(f"{json.dumps(str(pid))}: {_columns_text(b, compress)}"
                          for pid, b in batch.policy_batches.items())
        return f'{{"type": "MultiAgentBatch", "count": {int(batch.env_steps())}, "policy_batches": {{{inner}}}}}'
    body = _columns_text(batch, compress)
    return '{"type": "SampleBatch"' + (", " + body[1:] if len(body) > 2 else "}")


def _columns_text(batch: Any, compress: frozenset) -> str:
    parts = []
    for name, value in batch.items():
        value = np.asarray(value) if not isinstance(value, np.ndarray) else value
        if name in compress and value.dtype.kind in "biuf":
            text = json.dumps(pack(value))
        else:
            text = _array_text(value)
        parts.append(f"{json.dumps(str(name))}: {text}")
    return "{" + ", ".join(parts) + "}"


def _array_text(value: np.ndarray) -> str:
    """The JSON list of an array's rows."""
    if value.dtype == np.float32 and value.ndim in (1, 2) and value.size and np.isfinite(value).all():
        return _float32_text(value)
    return json.dumps(value.tolist(), default=_fallback, allow_nan=True)


def _float32_text(value: np.ndarray) -> str:
    """The JSON list of a finite float32 array's rows, each value with 9 significant digits (what
    any float32 needs to read back exactly; Python's C formatting, several times faster than the
    shortest form). A column of whole numbers is written as 1.0, 2.0, ... so it reads back as floats."""
    if np.all(value == np.round(value)) and np.abs(value).max() < 2.0 ** 53:
        strings = [s + ".0" for s in value.astype(np.int64).reshape(-1).astype(str).tolist()]
    else:
        strings = list(map(_NINE_DIGITS, value.reshape(-1).tolist()))
    if value.ndim == 1:
        return "[" + ",".join(strings) + "]"
    # Rows' values and the separators between them, interleaved, joined once.
    separators = np.full(value.shape, ",", dtype=object)
    separators[:, -1] = "],["
    parts = np.empty(2 * value.size, dtype=object)
    parts[0::2] = strings
    parts[1::2] = separators.reshape(-1)
    return "[[" + "".join(parts[:-1].tolist()) + "]]"


_NINE_DIGITS = "{:.9g}".format


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
