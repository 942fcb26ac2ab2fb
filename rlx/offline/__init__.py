"""Offline data: writing sampled experiences to files and training from them (`ray.rllib.offline`).

- `JsonWriter` / `JsonReader`: JSON-lines files, one batch per line, RLlib's format (see
  rlx.offline.batch_codec; compressed columns use zlib + base64, rlx.offline.compression).
- `ParquetWriter` / `ParquetReader` (rlx.offline.parquet_io): the same as Parquet, with pyarrow.
- `rlx.offline.records`: what one record holds (a sampled batch, or an episode with
  `output_write_episodes`) and files of `output_max_rows_per_file` rows.
- `ShuffledInput`, `MixedInput`: shuffle a reader's batches; mix sources by probability.
- `OfflineData`, `OfflinePreLearner` (RLlib's new stack): `input_` read through `ray.data` (rlx's
  embedded Parquet/JSON reader without Ray) and mapped to train batches; used when
  `offline_data()` sets a new-stack key such as `input_read_method` (see docs/offline.md).
- `IOContext`, `InputReader`, `OutputWriter`, `NoopOutput`: the interfaces custom readers
  and writers implement.

Algorithms use them through `config.offline_data(input_=..., output=...)`. The names are
imported on first use, so the config's option checks (rlx.offline.options) stay light.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "IOContext": "rlx.offline.io_context",
    "InputReader": "rlx.offline.input_reader",
    "JsonReader": "rlx.offline.json_reader",
    "JsonWriter": "rlx.offline.json_writer",
    "MixedInput": "rlx.offline.mixed_input",
    "NoopOutput": "rlx.offline.output_writer",
    "OfflineData": "rlx.offline.offline_data",
    "OfflinePreLearner": "rlx.offline.offline_prelearner",
    "OutputWriter": "rlx.offline.output_writer",
    "ShuffledInput": "rlx.offline.shuffled_input",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlx.offline' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
