"""Checks of the offline_data() settings (used by the option table in common_options.py)."""
from __future__ import annotations

import math
import numbers
import os
from typing import Any

from rlx.utils.errors import ConfigError

FORMATS = ("json", "parquet")


def check_distribution(name: str, dist: Any) -> dict:
    """A {source: probability} dict with probabilities >= 0 summing to 1; ConfigError otherwise."""
    if not isinstance(dist, dict) or not dist:
        raise ConfigError(f"'{name}' as a mix of sources must be a non-empty dict {{source: probability}}, got {dist!r}.")
    for source, p in dist.items():
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not math.isfinite(p) or p < 0:
            raise ConfigError(f"'{name}' gives source {source!r} the probability {p!r}; probabilities are numbers >= 0.")
        if not (isinstance(source, str) or callable(source)):
            raise ConfigError(f"'{name}' has the source {source!r}; sources are 'sampler', a path or glob of offline "
                              "files, or a callable fn(ioctx) -> InputReader.")
    total = sum(float(p) for p in dist.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise ConfigError(f"the probabilities of '{name}' must sum to 1.0, they sum to {total:g}: {dist!r}.")
    return dict(dist)


def check_input(name: str, value: Any) -> Any:
    """input_: 'sampler', 'dataset' (files named by input_config), a path or glob, a list of paths,
    a {source: probability} dict, or a callable fn(ioctx) -> InputReader (an InputReader class too)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if not value:
            raise ConfigError(f"'{name}' must not be empty: use 'sampler' (the env) or a path to offline files.")
        return value
    if isinstance(value, (list, tuple)):
        paths = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise ConfigError(f"'{name}' as a list must hold one or more file paths, got {value!r}.")
        return paths
    if isinstance(value, dict):
        return check_distribution(name, value)
    if callable(value):
        return value
    raise ConfigError(f"'{name}' must be 'sampler', a path or glob of offline files, a list of files, a dict "
                      f"{{source: probability}} or a callable fn(ioctx) -> InputReader; got {value!r}.")


def check_output(name: str, value: Any) -> Any:
    """output: None, 'logdir', 'dataset' (the path in output_config), a directory, or a callable
    fn(ioctx) -> OutputWriter."""
    if value is None or callable(value) and not isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str) and value:
        return value
    raise ConfigError(f"'{name}' must be None, 'logdir', a directory path or a callable fn(ioctx) -> OutputWriter; "
                      f"got {value!r}.")


def check_io_config(name: str, value: Any) -> dict:
    """input_config / output_config: a dict; its 'format', when given, is 'json' or 'parquet'."""
    if not isinstance(value, dict):
        raise ConfigError(f"'{name}' must be a dict, got {value!r}.")
    fmt = value.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"'{name}' has format {fmt!r}; rlx reads and writes {' and '.join(map(repr, FORMATS))}.")
    return dict(value)


def check_columns(name: str, value: Any) -> list:
    """output_compress_columns: a list of column names."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) \
            or not all(isinstance(c, str) for c in value):
        raise ConfigError(f"'{name}' must be a list of column names, e.g. ['obs', 'new_obs'] or []; got {value!r}.")
    return list(value)


#: `input_filesystem` values RLlib names (besides a pyarrow.fs.FileSystem instance).
FILESYSTEMS = ("gcs", "s3", "abs")


def check_read_method(name: str, value: Any) -> Any:
    """input_read_method: None (by the files' extension), the name of a `ray.data` read function
    ('read_parquet', 'read_json', ...) or a callable fn(paths, **input_read_method_kwargs)."""
    if value is None or callable(value):
        return value
    if isinstance(value, str) and value.startswith("read_"):
        return value
    raise ConfigError(f"'{name}' must be the name of a ray.data read function such as 'read_parquet' or "
                      f"'read_json', a callable fn(paths, **kwargs) -> Dataset, or None; got {value!r}.")


#: output_write_method values: the ray.data write function RLlib 2.60 writes with, and the format rlx writes.
WRITE_METHODS = {"write_parquet": "parquet", "write_json": "json"}


def check_write_method(name: str, value: Any) -> Any:
    """output_write_method: None (the format of output_config, else rlx's choice) or the name of
    the `ray.data` write function RLlib writes with: 'write_parquet' or 'write_json'."""
    if value is None or (isinstance(value, str) and value in WRITE_METHODS):
        return value
    raise ConfigError(f"'{name}' must be None, {' or '.join(map(repr, WRITE_METHODS))} (the files rlx writes); "
                      f"got {value!r}. For another format, write with a callable output fn(ioctx) -> OutputWriter.")


def check_filesystem(name: str, value: Any) -> Any:
    """input_filesystem: None (local files), 'gcs', 's3', 'abs' or a pyarrow.fs.FileSystem."""
    if value is None or value in FILESYSTEMS:
        return value
    if type(value).__module__.startswith("pyarrow"):
        return value
    raise ConfigError(f"'{name}' must be None (local files), one of {list(FILESYSTEMS)} or a "
                      f"pyarrow.fs.FileSystem instance; got {value!r}.")


def check_schema(name: str, value: Any) -> dict:
    """input_read_schema: {rlx column name: the column's name in the data}."""
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"'{name}' must map column names to the data's column names, e.g. "
                          f"{{'obs': 'o_t', 'new_obs': 'o_tp1'}}; got {value!r}.")
    return dict(value)
