"""Building the InputReader of `input_` and the OutputWriter of `output` from a config."""
from __future__ import annotations

import os
from typing import Any

from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.output_writer import OutputWriter
from rlx.utils.errors import ConfigError

SAMPLER = "sampler"
DATASET = "dataset"


def _setting(config: Any, key: str) -> Any:
    return config.get(key) if hasattr(config, "get") else getattr(config, key, None)


def input_mentions_sampler(input_: Any) -> bool:
    """Whether `input_` samples the envs (alone, or as one source of a mix). A callable source
    counts as offline: rlx cannot tell what it reads."""
    if isinstance(input_, str):
        return input_ == SAMPLER
    if isinstance(input_, dict):
        return any(source == SAMPLER and p > 0 for source, p in input_.items())
    return False


def make_input_reader(ioctx: IOContext) -> InputReader | None:
    """The InputReader of the config's `input_` (None for 'sampler': the envs are sampled
    directly), shuffled over `shuffle_buffer_size` batches when that is positive."""
    config = ioctx.config
    input_ = _setting(config, "input_")
    if input_ == SAMPLER:
        return None
    if isinstance(input_, dict):
        from rlx.offline.mixed_input import MixedInput

        reader: InputReader = MixedInput(input_, ioctx)
    elif input_ == DATASET:
        reader = file_reader(_dataset_paths(ioctx.input_config), ioctx)
    else:
        reader = reader_for_source(input_, ioctx)
    shuffle = int(_setting(config, "shuffle_buffer_size") or 0)
    if shuffle > 0:
        from rlx.offline.shuffled_input import ShuffledInput

        seed = _setting(config, "seed")
        reader = ShuffledInput(reader, shuffle, seed=None if seed is None else int(seed) + 211)
    return reader


def registered_input_creator(name: str) -> Any | None:
    """The input creator (fn(ioctx) -> InputReader) registered under `name` with Ray Tune's
    `ray.tune.registry.register_input`, if any; Ray is looked at only when something imported
    that module already."""
    import sys

    tune_registry = sys.modules.get("ray.tune.registry")
    if tune_registry is None:
        return None
    try:
        if tune_registry._global_registry.contains(tune_registry.RLLIB_INPUT, name):
            return tune_registry._global_registry.get(tune_registry.RLLIB_INPUT, name)
    except Exception:  # noqa: BLE001 - a registry Ray cannot read (no Ray session): not registered
        return None
    return None


def _dataset_paths(input_config: dict) -> Any:
    paths = input_config.get("paths", input_config.get("path"))
    if not paths:
        raise ConfigError("input_='dataset' reads the files named by input_config: give "
                          "input_config={'format': 'json' or 'parquet', 'paths': [...]} (or 'path').")
    return paths


def reader_for_source(source: Any, ioctx: IOContext) -> InputReader:
    """The InputReader of one source: 'sampler', offline files, or a callable fn(ioctx) -> InputReader."""
    if isinstance(source, str) and source == SAMPLER:
        sampler = ioctx.default_sampler_input()
        if sampler is None:
            raise ConfigError("input 'sampler' needs envs to sample, and this IOContext has none.")
        return sampler
    from rlx.offline.dataset_readers import dataset_reader, is_dataset_source

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
            from rlx.env.external.reader import ExternalEnvInput

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
        from rlx.offline.parquet_io import ParquetReader

        return ParquetReader(inputs, ioctx)
    from rlx.offline.json_reader import JsonReader

    return JsonReader(inputs, ioctx)


def _guess_format(inputs: Any) -> str:
    from rlx.offline.files import resolve_input_files
    from rlx.offline.parquet_io import PARQUET_EXTENSIONS
    from rlx.offline.spaces import OfflineDataError

    try:
        files = resolve_input_files(inputs, PARQUET_EXTENSIONS)
    except OfflineDataError:
        return "json"  # the JSON reader explains what is missing
    return "parquet" if files and all(f.endswith(PARQUET_EXTENSIONS) for f in files) else "json"


def make_output_writer(ioctx: IOContext) -> OutputWriter | None:
    """The OutputWriter of the config's `output` (None when it is None): JSON lines, or Parquet
    with output_config={'format': 'parquet'}, with the records and files that
    output_write_episodes, output_max_rows_per_file and output_write_remaining_data say; a
    callable output is called with `ioctx`."""
    config = ioctx.config
    output = _setting(config, "output")
    if output is None:
        return None
    record_settings = _record_settings(config)
    if callable(output) and not isinstance(output, str):
        # write_remaining_data alone changes nothing (it applies to max_rows_per_file's buffer).
        set_ones = [k for k in ("write_episodes", "max_rows_per_file") if record_settings[k] != RECORD_DEFAULTS[k]]
        if set_ones:
            keys = " and ".join(f"output_{k}" for k in set_ones)
            raise ConfigError(f"{keys} shape the JSON and Parquet files rlx writes; a custom output "
                              f"{getattr(output, '__qualname__', repr(output))}(ioctx) receives every sampled batch "
                              "and stores it its own way. Leave them at their defaults, or split the batches in "
                              "your writer (rlx.offline.records.episode_records, RecordBuffer).")
        writer = output(ioctx)
        if not callable(getattr(writer, "write", None)):
            name = getattr(output, "__qualname__", repr(output))
            raise ConfigError(f"output {name}(ioctx) returned {type(writer).__name__}, which has no write() method; "
                              "it must return an rlx.offline.OutputWriter.")
        return writer
    out_config = ioctx.output_config
    if output == "logdir":
        path = ioctx.log_dir
    elif output == DATASET:
        path = out_config.get("path")
        if not path:
            raise ConfigError("output='dataset' writes to output_config['path']: give "
                              "output_config={'format': 'json' or 'parquet', 'path': '/some/dir'}.")
    else:
        path = output
    max_size = int(_setting(config, "output_max_file_size"))
    if out_config.get("format", "json") == "parquet":
        from rlx.offline.parquet_io import ParquetWriter

        return ParquetWriter(path, ioctx, max_file_size=max_size, **record_settings)
    from rlx.offline.json_writer import JsonWriter

    return JsonWriter(path, ioctx, max_file_size=max_size,
                      compress_columns=_setting(config, "output_compress_columns") or (), **record_settings)


#: What records rlx's file writers write, and how many per file, by default (rlx.offline.records).
RECORD_DEFAULTS = {"write_episodes": False, "max_rows_per_file": None, "write_remaining_data": False}


def _record_settings(config: Any) -> dict:
    """The writer arguments of output_write_episodes, output_max_rows_per_file and
    output_write_remaining_data (their defaults where a config lacks them)."""
    values = {"write_episodes": _setting(config, "output_write_episodes"),
              "max_rows_per_file": _setting(config, "output_max_rows_per_file"),
              "write_remaining_data": _setting(config, "output_write_remaining_data")}
    return {k: RECORD_DEFAULTS[k] if v is None else v for k, v in values.items()}
