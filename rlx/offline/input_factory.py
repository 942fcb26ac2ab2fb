"""Building the InputReader of `input_` and the OutputWriter of `output` from a config."""
from __future__ import annotations

from typing import Any

from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.json_writer import JsonWriter
from rlx.offline.mixed_input import MixedInput
from rlx.offline.offline_data import OfflineDataInput, uses_offline_data
from rlx.offline.options import WRITE_METHODS
from rlx.offline.output_writer import OutputWriter
from rlx.offline.parquet_io import ParquetWriter
from rlx.offline.shuffled_input import ShuffledInput
from rlx.offline.sources import (  # noqa: F401 - reader_for_source, file_reader, registered_input_creator: old home
    DATASET, SAMPLER, file_reader, reader_for_source, registered_input_creator)
from rlx.utils.errors import ConfigError


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
    directly), shuffled over `shuffle_buffer_size` batches when that is positive. Files read
    with new-stack settings (rlx.offline.offline_data.NEW_STACK_KEYS) go through OfflineData."""
    config = ioctx.config
    input_ = _setting(config, "input_")
    if input_ == SAMPLER:
        return None
    if not isinstance(input_, dict) and not callable(input_) and uses_offline_data(config):
        # New-stack reading (input_read_method, prelearner_class, ...): through ray.data when installed.
        reader: InputReader = OfflineDataInput(config)
    elif isinstance(input_, dict):
        reader = MixedInput(input_, ioctx)
    elif input_ == DATASET:
        reader = file_reader(_dataset_paths(ioctx.input_config), ioctx)
    else:
        reader = reader_for_source(input_, ioctx)
    shuffle = int(_setting(config, "shuffle_buffer_size") or 0)
    if shuffle > 0:
        seed = _setting(config, "seed")
        reader = ShuffledInput(reader, shuffle, seed=None if seed is None else int(seed) + 211)
    return reader


def _dataset_paths(input_config: dict) -> Any:
    paths = input_config.get("paths", input_config.get("path"))
    if not paths:
        raise ConfigError("input_='dataset' reads the files named by input_config: give "
                          "input_config={'format': 'json' or 'parquet', 'paths': [...]} (or 'path').")
    return paths


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
    if output_format(config) == "parquet":
        return ParquetWriter(path, ioctx, max_file_size=max_size, **record_settings)
    return JsonWriter(path, ioctx, max_file_size=max_size,
                      compress_columns=_setting(config, "output_compress_columns") or (), **record_settings)


def output_format(config: Any) -> str:
    """The format ('json' or 'parquet') rlx writes `output` in: output_config's 'format', else
    output_write_method's ('write_parquet', 'write_json'), else Parquet for a config that records
    the way RLlib 2.60's new stack does (it sets output_max_rows_per_file or
    output_write_remaining_data, which only RLlib's new-stack recorder reads, and which writes
    Parquet by default), else JSON (RLlib's old-stack format, rlx's default)."""
    fmt = dict(_setting(config, "output_config") or {}).get("format")
    if fmt is not None:
        return str(fmt)
    method = _setting(config, "output_write_method")
    if method is not None:
        return WRITE_METHODS[method]
    if _setting(config, "output_max_rows_per_file") is not None or _setting(config, "output_write_remaining_data"):
        return "parquet"
    return "json"


#: What records rlx's file writers write, and how many per file, by default (rlx.offline.records).
RECORD_DEFAULTS = {"write_episodes": False, "max_rows_per_file": None, "write_remaining_data": False}


def _record_settings(config: Any) -> dict:
    """The writer arguments of output_write_episodes, output_max_rows_per_file and
    output_write_remaining_data (their defaults where a config lacks them)."""
    values = {"write_episodes": _setting(config, "output_write_episodes"),
              "max_rows_per_file": _setting(config, "output_max_rows_per_file"),
              "write_remaining_data": _setting(config, "output_write_remaining_data")}
    return {k: RECORD_DEFAULTS[k] if v is None else v for k, v in values.items()}
