"""LocalDataset: the part of `ray.data.Dataset` that OfflineData uses, over local Parquet/JSON files.

When Ray is not installed, OfflineData reads `input_` with this embedded reader instead of
`ray.data`: the rows are read in this process (no streaming over nodes) and batches are mapped
and served in file order, one pass after another.
"""
from __future__ import annotations

import gzip
import json
from typing import Any, Callable, Iterator

import numpy as np

from rlx.offline.files import resolve_input_files, strip_local_scheme
from rlx.offline.parquet_io import import_pyarrow
from rlx.offline.spaces import OfflineDataError

#: The ray.data read methods LocalDataset has, with the file extensions a directory is searched for.
READ_METHODS = {"read_parquet": (".parquet",), "read_json": (".json", ".jsonl", ".json.gz")}


def _column(values: list[Any]) -> np.ndarray:
    """A column as an array: stacked when its items share a shape, else an object array."""
    try:
        array = np.asarray(values)
        if array.dtype != object:
            return array
    except ValueError:
        pass
    out = np.empty(len(values), dtype=object)
    out[:] = [np.asarray(v) if isinstance(v, list) else v for v in values]
    return out


def _columns_of_rows(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return {name: _column([row.get(name) for row in rows]) for name in names}


def _read_rows(method: str, paths: Any) -> dict[str, np.ndarray]:
    files = resolve_input_files(paths, READ_METHODS[method])
    if method == "read_parquet":
        _, parquet = import_pyarrow()
        tables = [parquet.read_table(strip_local_scheme(f)).to_pydict() for f in files]
        columns: dict[str, list[Any]] = {}
        total = 0
        for table in tables:  # files with different columns: None where a file lacks one
            num_rows = len(next(iter(table.values()), []))
            for name in table:
                columns.setdefault(name, [None] * total)
            for name, values in columns.items():
                values.extend(table.get(name, [None] * num_rows))
            total += num_rows
        return {name: _column(values) for name, values in columns.items()}
    rows: list[dict[str, Any]] = []
    for path in files:
        opener: Callable[..., Any] = gzip.open if path.endswith(".gz") else open
        with opener(strip_local_scheme(path), "rt") as handle:
            rows.extend(json.loads(line) for line in handle if line.strip())
    return _columns_of_rows(rows)


class LocalDataset:
    """Rows of local files as a dict of columns, with ray.data's `map_batches` / `iter_batches`
    / `iterator` / `materialize` / `count` (the subset OfflineData calls)."""

    def __init__(self, columns: dict[str, np.ndarray], mappers: list[tuple[Callable, int | None]] | None = None):
        self._columns = columns
        self._mappers = mappers or []

    @classmethod
    def read(cls, method: str, paths: Any, **kwargs: Any) -> "LocalDataset":
        """Read `paths` with the embedded counterpart of `ray.data.<method>`."""
        if method not in READ_METHODS:
            raise OfflineDataError(f"Without Ray, rlx reads input_ with {sorted(READ_METHODS)}; "
                                   f"input_read_method={method!r} needs Ray Data (pip install 'ray[data]').")
        if kwargs:
            raise OfflineDataError(f"input_read_method_kwargs {sorted(kwargs)} are ray.data options; without Ray "
                                   "rlx reads local files and takes none. Install 'ray[data]' or drop them.")
        columns = _read_rows(method, paths)
        if not columns or not len(next(iter(columns.values()))):
            raise OfflineDataError(f"The offline input {paths!r} holds no rows.")
        return cls(columns)

    def count(self) -> int:
        """Rows in the (unmapped) data."""
        return len(next(iter(self._columns.values())))

    def materialize(self) -> "LocalDataset":
        """The dataset itself (its rows are already in memory)."""
        return self

    def map_batches(self, fn: Any, *, fn_constructor_kwargs: dict | None = None, batch_size: int | None = None,
                    **kwargs: Any) -> "LocalDataset":
        """A dataset whose batches are `fn(batch)`; a class `fn` is built once with fn_constructor_kwargs.
        Ray's execution settings (concurrency, zero_copy_batch, ...) do not apply in one process."""
        mapper = fn(**(fn_constructor_kwargs or {})) if isinstance(fn, type) else fn
        return LocalDataset(self._columns, self._mappers + [(mapper, batch_size)])

    def _raw_batches(self, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
        n = self.count()
        for start in range(0, n, batch_size):
            yield {name: values[start:start + batch_size] for name, values in self._columns.items()}

    def iter_batches(self, *, batch_size: int | None = 256, _collate_fn: Callable | None = None,
                     **kwargs: Any) -> Iterator[Any]:
        """One pass over the data in batches of `batch_size` rows (mapped, then collated)."""
        size = int(batch_size or self.count())
        first_size = self._mappers[0][1] if self._mappers and self._mappers[0][1] else size
        pending: dict[str, list[np.ndarray]] = {}
        pending_rows = 0
        for batch in self._raw_batches(first_size):
            for mapper, _ in self._mappers:
                batch = mapper(batch)
            for name, values in batch.items():
                pending.setdefault(name, []).append(np.asarray(values))
            pending_rows += len(next(iter(batch.values()), ()))
            while pending_rows >= size:
                joined = {name: np.concatenate(parts) for name, parts in pending.items()}
                out = {name: values[:size] for name, values in joined.items()}
                pending = {name: [values[size:]] for name, values in joined.items()}
                pending_rows -= size
                yield _collate_fn(out) if _collate_fn else out
        if pending_rows:
            out = {name: np.concatenate(parts) for name, parts in pending.items()}
            yield _collate_fn(out) if _collate_fn else out

    def take_batch(self, batch_size: int = 20) -> dict[str, np.ndarray]:
        """The first `batch_size` rows (mapped) as one batch of columns, as `ray.data.Dataset.take_batch`."""
        for batch in self.iter_batches(batch_size=int(batch_size)):
            return batch
        raise OfflineDataError("take_batch(): the dataset holds no rows.")

    def iterator(self) -> "LocalDataset":
        """The dataset (it iterates itself with iter_batches)."""
        return self

    def streaming_split(self, n: int, *, equal: bool = False, locality_hints: Any = None) -> list[Any]:
        """Splitting the stream over several Learners needs Ray Data."""
        raise OfflineDataError(f"Reading offline data for {n} Learners (streaming_split) needs Ray Data: install "
                               "'ray[data]', or train with num_learners <= 1.")
