"""Experiences as Parquet files (optional: needs pyarrow, rlx's `parquet` extra).

By default one row per step, one Parquet column per batch column. Columns with several
values per row (observations, action distribution inputs) are fixed-size lists of the row's
values flattened, their row shape in the field's metadata (`rlx_shape`). Each written batch
is one row group, read back as one batch; multi-agent batches add a `policy_id` column and a
`batch_env_steps` column (the MultiAgentBatch's env-step count).

With `output_write_episodes=True` a row is one episode chunk instead: every column is a list
of the chunk's per-step values (as above), and the schema's metadata says `rlx_records:
episodes`; each such row is read back as one batch.
"""
from __future__ import annotations

import inspect
import json
import logging
import math
import os
import random
import weakref
from typing import Any, Iterator

import numpy as np

from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, batch_kind
from rlx.offline.concat import concat_flat, num_rows
from rlx.offline.files import resolve_input_files
from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.json_writer import DEFAULT_MAX_FILE_SIZE, local_directory, output_file_name
from rlx.offline.record_checks import check_record, record_has_rows
from rlx.offline.records import RecordWriter, take
from rlx.offline.spaces import OfflineDataError, check_batch, spaces_of
from rlx.utils.errors import ConfigError, NotSupportedYetError, install_hint

logger = logging.getLogger("rlx")

PARQUET_EXTENSIONS = (".parquet",)
POLICY_ID = "policy_id"
ENV_STEPS = "batch_env_steps"
_SHAPE_KEY = b"rlx_shape"
_JSON_KEY = b"rlx_json"
#: Schema metadata of tables whose rows are episode records.
_RECORDS_KEY = b"rlx_records"
EPISODES = b"episodes"


def import_pyarrow() -> Any:
    """pyarrow and pyarrow.parquet; a ConfigError naming the extra to install when missing."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet offline data (output_config/input_config {'format': 'parquet'}, or *.parquet "
                          "input files) needs pyarrow, rlx's optional 'parquet' extra: "
                          f"{install_hint('parquet')}. Or use the default JSON format.") from None
    return pa, pq


class ParquetWriter(RecordWriter):
    """Writes records into Parquet files under `path`, starting a new file once one holds
    `max_file_size` bytes. Files are complete once closed (the Algorithm closes them when it
    stops, and at interpreter exit at the latest).

    By default each written batch is one row group of one row per step. With `write_episodes`
    each episode chunk is one row whose columns hold the chunk's per-step values as lists (the
    chunks of one write in one row group). `max_rows_per_file` and `write_remaining_data` are
    RLlib's output_max_rows_per_file and output_write_remaining_data (rlx.offline.records).
    """

    def __init__(self, path: str, ioctx: IOContext | None = None, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 write_episodes: bool = False, max_rows_per_file: int | None = None,
                 write_remaining_data: bool = False):
        super().__init__(write_episodes, max_rows_per_file, write_remaining_data)
        self._pa, self._pq = import_pyarrow()
        self.ioctx = ioctx or IOContext()
        self.path = local_directory(path, "output")
        self.max_file_size = int(max_file_size)
        self.file_index = 0
        self.files: list[str] = []
        self._sink: Any = None
        self._writer: Any = None
        self._schema: Any = None
        self._finalizer = weakref.finalize(self, _close_parquet, [None, None])

    def _write_records(self, records: list[Any]) -> None:
        if self.write_episodes:
            tables = [episodes_to_table(records)]
        else:
            tables = [batch_to_table(record) for record in records]
        for table in tables:
            full = self.max_rows_per_file is None and self._writer is not None \
                and self._sink.tell() >= self.max_file_size
            if self._writer is not None and (full or not table.schema.equals(self._schema)):
                self._end_file()
            if self._writer is None:
                self._open(table.schema)
            self._writer.write_table(table)

    def _open(self, schema: Any) -> None:
        path = os.path.join(self.path, output_file_name(self.ioctx, self.file_index, "parquet"))
        while os.path.exists(path):
            self.file_index += 1
            path = os.path.join(self.path, output_file_name(self.ioctx, self.file_index, "parquet"))
        self._sink = open(path, "wb")
        # Page checksums let readers detect damaged pages (ParquetReader verifies them).
        self._writer = self._pq.ParquetWriter(self._sink, schema,
                                              **_if_supported(self._pq.ParquetWriter, write_page_checksum=True))
        self._schema = schema
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_parquet, [self._writer, self._sink])
        self.files.append(path)
        self.file_index += 1
        logger.info("Writing experiences to %s", path)

    def _end_file(self) -> None:
        """Finish the current file (writes its footer)."""
        if self._writer is not None:
            self._finalizer()
            self._writer = self._sink = None

    def __repr__(self) -> str:
        return f"ParquetWriter(path={self.path!r}, files={len(self.files)})"


def _close_parquet(handles: list) -> None:
    writer, sink = handles
    if writer is not None:
        writer.close()
    if sink is not None:
        sink.close()


def batch_to_table(batch: Any) -> Any:
    """The pyarrow Table of a flat SampleBatch or MultiAgentBatch."""
    pa, _ = import_pyarrow()
    if batch_kind(batch) is MultiAgentBatch:  # rows carry their policy id and the batch's env steps
        parts = []
        for pid, columns in batch.policy_batches.items():
            n = num_rows(SampleBatch(columns))
            extra = {POLICY_ID: np.array([str(pid)] * n, dtype=object),
                     ENV_STEPS: np.full(n, batch.env_steps(), np.int64)}
            parts.append(_table(pa, {**columns, **extra}))
        try:
            return pa.concat_tables(parts)
        except pa.ArrowInvalid:
            raise NotSupportedYetError(
                "Parquet output of policies whose columns differ in shape or type",
                "one Parquet file holds one schema", fix="Use the default JSON output for these policies.") from None
    return _table(pa, dict(batch))


def episodes_to_table(records: list[Any]) -> Any:
    """The pyarrow Table of episode records (flat single-agent SampleBatches): one row per record,
    each column a list of the record's per-step values. The schema's metadata marks the table
    as episodes (read back by `table_to_batches`)."""
    pa, _ = import_pyarrow()
    lengths = [len(r) for r in records]
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32), pa.int32())
    steps = concat_flat(list(records))
    arrays, fields = [], []
    for name, value in steps.items():
        array, metadata = _step_array(pa, name, value)
        lists = pa.ListArray.from_arrays(offsets, array)
        arrays.append(lists)
        fields.append(pa.field(str(name), lists.type, metadata=metadata))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata={_RECORDS_KEY: EPISODES}))


def _table(pa: Any, columns: dict[str, Any]) -> Any:
    arrays, fields = [], []
    for name, value in columns.items():
        array, metadata = _step_array(pa, name, value)
        arrays.append(array)
        fields.append(pa.field(str(name), array.type, metadata=metadata))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _step_array(pa: Any, name: str, value: Any) -> tuple[Any, dict | None]:
    """(pyarrow array of a column's per-step values, the field metadata that reads it back)."""
    value = np.asarray(value)
    if value.dtype == object:
        if name == POLICY_ID:
            return pa.array(value.tolist(), pa.string()), None
        return pa.array([json.dumps(v, default=repr) for v in value.tolist()], pa.string()), {_JSON_KEY: b"1"}
    if value.ndim > 1:
        width = int(np.prod(value.shape[1:]))
        flat = pa.array(np.ascontiguousarray(value).reshape(-1))
        return pa.FixedSizeListArray.from_arrays(flat, width), {_SHAPE_KEY: json.dumps(list(value.shape[1:])).encode()}
    return pa.array(value), None


def table_to_batches(table: Any) -> list[Any]:
    """The records of a Table (a row group): one flat batch, or one SampleBatch per row of an
    episodes table (see `episodes_to_table`)."""
    metadata = table.schema.metadata or {}
    if metadata.get(_RECORDS_KEY) != EPISODES:
        return [table_to_batch(table)]
    if not table.num_columns:
        return []
    lengths = np.diff(table.column(0).combine_chunks().offsets.to_numpy()).astype(np.int64)
    steps = SampleBatch({field.name: _column_values(field, column.combine_chunks().flatten())
                         for field, column in zip(table.schema, table.columns)})
    starts = np.cumsum(lengths) - lengths
    return [take(steps, int(s), int(s + n)) for s, n in zip(starts, lengths)]


def table_to_batch(table: Any) -> Any:
    """The flat SampleBatch (MultiAgentBatch when it has a policy_id column) of a Table."""
    columns = {}
    for field, column in zip(table.schema, table.columns):
        columns[field.name] = _column_values(field, column)
    if POLICY_ID not in columns:
        return SampleBatch(columns)
    ids = columns.pop(POLICY_ID)
    steps = columns.pop(ENV_STEPS, None)
    batches = {}
    for pid in dict.fromkeys(ids.tolist()):
        rows = ids == pid
        batches[str(pid)] = SampleBatch({k: v[rows] for k, v in columns.items()})
    count = int(steps.max()) if steps is not None and len(steps) else max(len(b) for b in batches.values())
    return MultiAgentBatch(batches, count)


def _column_values(field: Any, column: Any) -> np.ndarray:
    """The NumPy rows of a column (a pyarrow Array or ChunkedArray of per-step values)."""
    metadata = field.metadata or {}
    if _SHAPE_KEY in metadata:
        shape = tuple(json.loads(metadata[_SHAPE_KEY]))
        lists = column.combine_chunks() if hasattr(column, "combine_chunks") else column
        flat = lists.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape((len(column),) + shape)
    if _JSON_KEY in metadata:
        out = np.empty(len(column), dtype=object)
        out[:] = [json.loads(v) for v in column.to_pylist()]
        return out
    values = column.to_numpy(zero_copy_only=False)
    if values.dtype == object and field.name == POLICY_ID:
        return np.asarray(values, dtype=object)
    return values


class ParquetReader(InputReader):
    """Reads batches from Parquet files (one row group per batch, or one row per episode record),
    as JsonReader does from JSON:
    the first file by worker index, later ones at random with the config's seed; at least
    `train_batch_size` rows per `next()`; every batch checked for values rlx cannot train on
    (rlx.offline.record_checks) and against the worker's spaces. Row groups of 0 rows are
    skipped, and input without rows raises OfflineDataError once every file was read through.
    Pages with checksums (rlx writes them) are verified: a damaged page, like any row group
    pyarrow cannot decode, raises OfflineDataError naming the file, row group and column."""

    def __init__(self, inputs: Any, ioctx: IOContext | None = None):
        self._pa, self._pq = import_pyarrow()
        self.ioctx = ioctx or IOContext()
        config = self.ioctx.config
        get = config.get if hasattr(config, "get") else lambda k: getattr(config, k, None)
        self.batch_size = int(get("train_batch_size") or 1)
        workers = int(get("num_env_runners") or 0)
        if workers:
            self.batch_size = max(math.ceil(self.batch_size / workers), 1)
        self._count_steps_by = get("count_steps_by") or "env_steps"
        self.files = resolve_input_files(inputs, PARQUET_EXTENSIONS)
        seed = get("seed")
        self._rng = random.Random(None if seed is None else int(seed) + self.ioctx.worker_index)
        self._groups: Iterator[Any] | None = None
        self._started = False
        self._path: str | None = None
        #: Record batches the current file gave so far, and the files read through without a row.
        self._file_rows = 0
        self._empty_files: set[str] = set()

    def next(self) -> Any:
        """At least `batch_size` rows of the next row groups, as one batch."""
        batches, count = [], 0
        while count < self.batch_size or not batches:
            batch = self._next_group()
            batches.append(batch)
            count += num_rows(batch, self._count_steps_by)
        return concat_flat(batches)

    def read_all_files(self) -> Iterator[Any]:
        """Every record of every file once, in file order: one batch per row group (per row of
        episode files)."""
        for path in self.files:
            yield from self._file_groups(path)

    def _next_group(self) -> Any:
        """The next record that holds rows (see the class docstring on input without rows)."""
        while True:
            if self._groups is None:
                files = self.files if not self._empty_files else [f for f in self.files if f not in self._empty_files]
                self._path = files[0] if not self._started else self._rng.choice(files)
                self._started = True
                self._groups = self._file_groups(self._path)
                self._file_rows = 0
            batch = next(self._groups, None)
            if batch is None:  # the file ended
                self._groups = None
                if self._file_rows == 0 and self._path is not None:
                    self._empty_files.add(self._path)
                if self._empty_files.issuperset(self.files):
                    shown = ", ".join(self.files[:5]) + (" ..." if len(self.files) > 5 else "")
                    raise OfflineDataError(f"the offline input files hold no rows (they are empty or hold only "
                                           f"row groups of 0 rows): {shown}.")
                continue
            if record_has_rows(batch):
                self._file_rows += 1
                return batch

    def _file_groups(self, path: str) -> Iterator[Any]:
        try:
            parquet = self._pq.ParquetFile(
                path, **_if_supported(self._pq.ParquetFile, page_checksum_verification=True))
        except Exception as err:  # pyarrow raises ArrowInvalid and OSError for damaged files
            raise OfflineDataError(f"{path}: not a readable Parquet file ({type(err).__name__}: {err}); a file "
                                   "whose writer did not close it has no footer.") from None
        for index in range(parquet.num_row_groups):
            where = f"{path}, row group {index}"
            try:
                batches = table_to_batches(parquet.read_row_group(index))
            except OfflineDataError:
                raise
            except Exception as err:  # a damaged page (checksum, encoding) or a column rlx cannot decode
                detail = " ".join(str(err).split())  # pyarrow's messages span lines
                raise OfflineDataError(f"{where}: {_damaged_column(parquet, index)} cannot be read "
                                       f"({type(err).__name__}: {detail}); the file is damaged. Restore it from its "
                                       "source or leave it out of the input.") from None
            for batch in batches:
                check_record(batch, where)
                if self.ioctx.worker is not None and record_has_rows(batch):
                    check_batch(batch, spaces_of(self.ioctx.worker), where)
                yield batch

    def __repr__(self) -> str:
        return f"ParquetReader({len(self.files)} file(s), batch_size={self.batch_size})"


def _if_supported(cls: Any, **options: Any) -> dict:
    """The `options` the installed pyarrow's `cls` takes (page checksums need pyarrow >= 13)."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in options.items() if k in params}


def _damaged_column(parquet: Any, index: int) -> str:
    """Which column of row group `index` fails to read ("a column" when each reads alone)."""
    for name in parquet.schema_arrow.names:
        try:
            table_to_batches(parquet.read_row_group(index, columns=[name]))
        except Exception:  # noqa: BLE001 - the failing column is what we look for
            return f"column {name!r}"
    return "a column"
