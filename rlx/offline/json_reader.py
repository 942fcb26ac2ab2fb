"""JsonReader: experiences from JSON-lines files (`ray.rllib.offline.json_reader`)."""
from __future__ import annotations

import json
import logging
import math
import random
from typing import Any, Iterator

from rlx.offline.batch_codec import BatchFormatError, from_json_dict
from rlx.offline.concat import concat_flat, num_rows
from rlx.offline.files import resolve_input_files
from rlx.offline.input_reader import InputReader
from rlx.offline.io_context import IOContext
from rlx.offline.record_checks import check_record, record_has_rows
from rlx.offline.spaces import OfflineDataError, check_batch, spaces_of

logger = logging.getLogger("rlx")

#: Extensions a directory given as input is searched for.
JSON_EXTENSIONS = (".json", ".jsonl")


class JsonReader(InputReader):
    """Reads batches from JSON-lines files, one batch per line (see rlx.offline.batch_codec).

    The first file read is picked by the reader's worker index, later ones at random (with
    the config's seed, so a seeded run reads the same sequence); each file is read from its
    first line to its last. Each `next()` returns at least `train_batch_size` rows (divided
    among `num_env_runners`, as in RLlib).

    Args:
        inputs: a file, a directory (its *.json files), a glob such as "/tmp/out/*.json",
            or a list of files.
        ioctx: the IOContext; with a `worker` (an EnvRunner), every record is checked
            against the policies' observation and action spaces.

    A line that is not valid JSON, not a batch, or holding values rlx cannot train on
    (rlx.offline.record_checks) raises OfflineDataError naming the file, line and column.
    Records of 0 rows are skipped; input whose files hold no rows at all raises
    OfflineDataError once every file was read through.
    """

    def __init__(self, inputs: Any, ioctx: IOContext | None = None):
        self.ioctx = ioctx or IOContext()
        config = self.ioctx.config
        self.batch_size = reader_batch_size(config)
        self._count_steps_by = _get(config, "count_steps_by") or "env_steps"
        self.files = resolve_input_files(inputs, JSON_EXTENSIONS)
        seed = _get(config, "seed")
        self._rng = random.Random(None if seed is None else int(seed) + self.ioctx.worker_index)
        self.cur_file: Any = None
        self.cur_path: str | None = None
        self.cur_line = 0
        #: Rows the current file gave so far, and the files read through without a row.
        self._file_rows = 0
        self._empty_files: set[str] = set()

    def next(self) -> Any:
        """At least `batch_size` rows of the next lines, as one SampleBatch (or MultiAgentBatch)."""
        batches, count = [], 0
        while count < self.batch_size or not batches:
            batch = self._next_record()
            batches.append(batch)
            count += num_rows(batch, self._count_steps_by)
        return concat_flat(batches)

    def read_all_files(self) -> Iterator[Any]:
        """Every record of every file once, in file order: one batch per line."""
        for path in self.files:
            with _open(path) as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        yield self._parse(line, path, number)

    def _next_record(self) -> Any:
        """The next record that holds rows. Each file read through without a row is not opened
        again, so input without rows ends in OfflineDataError instead of reading forever."""
        while True:
            line = self._next_line()
            if line is None:  # a file ended
                if self._file_rows == 0 and self.cur_path is not None:
                    self._empty_files.add(self.cur_path)
                if self._empty_files.issuperset(self.files):
                    shown = ", ".join(self.files[:5]) + (" ..." if len(self.files) > 5 else "")
                    raise OfflineDataError(f"the offline input files hold no rows (they are empty or hold only "
                                           f"records of 0 rows): {shown}.")
                continue
            batch = self._parse(line, self.cur_path, self.cur_line)
            if record_has_rows(batch):
                self._file_rows += 1
                return batch

    def _next_line(self) -> str | None:
        """The next non-empty line, moving on to another file at the end of one; None when a
        file ended (the caller tries again)."""
        if self.cur_file is None:
            self._open_next_file()
        try:
            for line in self.cur_file:
                self.cur_line += 1
                if line.strip():
                    return line
        except UnicodeDecodeError:
            raise OfflineDataError(f"{self.cur_path}, line {self.cur_line + 1}: not UTF-8 text; is it an offline "
                                   "JSON file?") from None
        self.cur_file.close()
        self.cur_file = None
        return None

    def _open_next_file(self) -> None:
        if self.cur_path is None:
            # The first file depends on the worker, so parallel readers start on different files.
            worker = self.ioctx.worker
            total = int(getattr(worker, "num_workers", 0) or 0) if worker is not None else 0
            index = round((len(self.files) - 1) * (self.ioctx.worker_index / total)) if total else 0
            path = self.files[index]
        else:
            files = self.files if not self._empty_files else [f for f in self.files if f not in self._empty_files]
            path = self._rng.choice(files)
        self.cur_file = _open(path)
        self.cur_path = path
        self.cur_line = 0
        self._file_rows = 0

    def _parse(self, line: str, path: str | None, number: int) -> Any:
        where = f"{path}, line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise OfflineDataError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); the file may be "
                                   "truncated or not an offline data file.") from None
        try:
            batch = from_json_dict(data)
        except BatchFormatError as err:
            raise OfflineDataError(f"{where}: {err}") from None
        check_record(batch, where)
        if self.ioctx.worker is not None and record_has_rows(batch):
            check_batch(batch, spaces_of(self.ioctx.worker), where)
        return batch

    def close(self) -> None:
        """Close the file being read."""
        if self.cur_file is not None:
            self.cur_file.close()
            self.cur_file = None

    def __repr__(self) -> str:
        return f"JsonReader({len(self.files)} file(s), batch_size={self.batch_size})"


def reader_batch_size(config: Any) -> int:
    """Rows an offline reader returns per `next()`: `train_batch_size`, divided among
    `num_env_runners` as in RLlib."""
    size = int(_get(config, "train_batch_size") or 1)
    workers = int(_get(config, "num_env_runners") or 0)
    return max(math.ceil(size / workers), 1) if workers else size


def _open(path: str) -> Any:
    try:
        return open(path, encoding="utf-8")
    except FileNotFoundError:
        raise OfflineDataError(f"offline input file {path} not found (it was there when the reader started).") from None
    except OSError as err:
        raise OfflineDataError(f"cannot open offline input file {path}: {err}.") from None


def _get(config: Any, key: str) -> Any:
    if hasattr(config, "get"):
        return config.get(key)
    return getattr(config, key, None)
