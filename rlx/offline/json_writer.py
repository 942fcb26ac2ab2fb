"""JsonWriter: experiences as JSON-lines files, one record per line (`ray.rllib.offline.json_writer`)."""
from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any, Iterable

from rlx.offline.batch_codec import to_json
from rlx.offline.files import LOCAL_SCHEMES, strip_local_scheme, uri_scheme
from rlx.offline.io_context import IOContext
from rlx.offline.records import RecordWriter
from rlx.utils.errors import ConfigError

logger = logging.getLogger("rlx")

DEFAULT_MAX_FILE_SIZE = 64 * 1024 * 1024


def local_directory(path: str, what: str) -> str:
    """`path` as an absolute local directory (created if missing); a ConfigError for URIs."""
    path = os.fspath(path)
    scheme = uri_scheme(path)
    if scheme and scheme not in LOCAL_SCHEMES:
        raise ConfigError(f"{what} {path!r} is a {scheme}:// URI; rlx writes and reads local files only. "
                          "Give a local directory (and copy the files to the bucket yourself).")
    path = strip_local_scheme(path)
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"{what} {path!r} is a file; it must be a directory to write output files into.")
    os.makedirs(path, exist_ok=True)
    return path


def output_file_name(ioctx: IOContext, file_index: int, extension: str) -> str:
    """RLlib's output file name: output-<date>_worker-<worker index>_<file index>.<extension>."""
    stamp = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
    return f"output-{stamp}_worker-{ioctx.worker_index}_{file_index}.{extension}"


class JsonWriter(RecordWriter):
    """Writes records as lines of JSON into files under `path`: by default one line per written
    batch, and a new file once one holds `max_file_size` bytes.

    Args:
        path: the output directory (created if missing; a `file://` or `local://` URI of one too).
        ioctx: the IOContext (its worker_index goes into the file names).
        max_file_size: bytes after which the next record goes into a new file (when
            `max_rows_per_file` is None).
        compress_columns: columns stored compressed (see rlx.offline.compression); the
            others are JSON lists of row values.
        write_episodes, max_rows_per_file, write_remaining_data: RLlib's output_write_episodes,
            output_max_rows_per_file and output_write_remaining_data (see rlx.offline.records):
            one line per episode chunk instead of per batch; files of exactly that many rows
            (episodes, or steps); whether the rows left over at `close()` are written.
    """

    def __init__(self, path: str, ioctx: IOContext | None = None, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 compress_columns: Iterable[str] = frozenset(["obs", "new_obs"]), write_episodes: bool = False,
                 max_rows_per_file: int | None = None, write_remaining_data: bool = False):
        super().__init__(write_episodes, max_rows_per_file, write_remaining_data)
        self.ioctx = ioctx or IOContext()
        self.path = local_directory(path, "output")
        self.max_file_size = int(max_file_size)
        self.compress_columns = frozenset(compress_columns)
        self.file_index = 0
        self.bytes_written = 0
        self.cur_file: Any = None
        #: Paths of the files written so far.
        self.files: list[str] = []

    def _write_records(self, records: list[Any]) -> None:
        if not records:
            return
        for record in records:
            line = to_json(record, self.compress_columns)
            f = self._get_file()
            f.write(line)
            f.write("\n")
            self.bytes_written += len(line) + 1
        f.flush()

    def _get_file(self) -> Any:
        full = self.max_rows_per_file is None and self.bytes_written >= self.max_file_size
        if self.cur_file is None or full:
            self._end_file()
            path = os.path.join(self.path, output_file_name(self.ioctx, self.file_index, "json"))
            while os.path.exists(path):  # another writer of this second: never overwrite its file
                self.file_index += 1
                path = os.path.join(self.path, output_file_name(self.ioctx, self.file_index, "json"))
            self.cur_file = open(path, "w", encoding="utf-8")
            self.files.append(path)
            self.file_index += 1
            self.bytes_written = 0
            logger.info("Writing experiences to %s", path)
        return self.cur_file

    def _end_file(self) -> None:
        if self.cur_file is not None:
            self.cur_file.close()
            self.cur_file = None

    def __repr__(self) -> str:
        return f"JsonWriter(path={self.path!r}, files={len(self.files)})"
