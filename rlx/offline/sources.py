"""The InputReader of one offline source: 'sampler', offline files (JSON lines, Parquet), a
dataset ('minari:<id>', a D4RL-style .hdf5 file), a name registered with Ray Tune's
`register_input`, or a callable fn(ioctx) -> InputReader. `input_` and MixedInput's sources
are built here."""
from __future__ import annotations

import os
import sys
from typing import Any

from rlx.offline.dataset_readers import dataset_reader, is_dataset_source
from rlx.offline.files import resolve_input_files
from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.json_reader import JsonReader
from rlx.offline.parquet_io import PARQUET_EXTENSIONS, ParquetReader
from rlx.offline.spaces import OfflineDataError
from rlx.utils.errors import ConfigError

__all__ = ["DATASET", "SAMPLER", "file_reader", "reader_for_source", "registered_input_creator"]

SAMPLER = "sampler"
DATASET = "dataset"


def registered_input_creator(name: str) -> Any | None:
    """The input creator (fn(ioctx) -> InputReader) registered under `name` with Ray Tune's
    `ray.tune.registry.register_input`, if any; Ray is looked at only when something imported
    that module already."""
    tune_registry = sys.modules.get("ray.tune.registry")
    if tune_registry is None:
        return None
    try:
        if tune_registry._global_registry.contains(tune_registry.RLLIB_INPUT, name):
            return tune_registry._global_registry.get(tune_registry.RLLIB_INPUT, name)
    except Exception:  # noqa: BLE001 - a registry Ray cannot read (no Ray session): not registered
        return None
    return None


def reader_for_source(source: Any, ioctx: IOContext) -> InputReader:
    """The InputReader of one source: 'sampler', offline files, or a callable fn(ioctx) -> InputReader."""
    if isinstance(source, str) and source == SAMPLER:
        sampler = ioctx.default_sampler_input()
        if sampler is None:
            raise ConfigError("input 'sampler' needs envs to sample, and this IOContext has none.")
        return sampler
    registered = registered_input_creator(source) if isinstance(source, str) else None
    if registered is not None:
        return reader_for_source(registered, ioctx)
    if is_dataset_source(source):  # "minari:<id>" or a D4RL-style .hdf5 file
        return dataset_reader(source, ioctx)
    if isinstance(source, (str, os.PathLike, list, tuple)):
        return file_reader(source, ioctx)
    if callable(source):
        reader = source(ioctx)
        if getattr(reader, "_rlx_external_env", False):  # an ExternalEnv: train on the episodes it reports
            from rlx.env.external.reader import ExternalEnvInput  # torch: only for an ExternalEnv

            reader = ExternalEnvInput(ioctx, reader)
        if not callable(getattr(reader, "next", None)):
            name = getattr(source, "__qualname__", repr(source))
            raise ConfigError(f"input_ {name}(ioctx) returned {type(reader).__name__}, which has no next() method; "
                              "it must return an rlx.offline.InputReader.")
        return reader
    raise ConfigError(f"unknown offline input source {source!r}.")


def file_reader(inputs: Any, ioctx: IOContext) -> InputReader:
    """A JsonReader, or a ParquetReader when input_config's format is 'parquet' or (no format
    given) every named file is a .parquet file."""
    fmt = ioctx.input_config.get("format") or _guess_format(inputs)
    if fmt == "parquet":
        return ParquetReader(inputs, ioctx)
    return JsonReader(inputs, ioctx)


def _guess_format(inputs: Any) -> str:
    try:
        files = resolve_input_files(inputs, PARQUET_EXTENSIONS)
    except OfflineDataError:
        return "json"  # the JSON reader explains what is missing
    return "parquet" if files and all(f.endswith(PARQUET_EXTENSIONS) for f in files) else "json"
