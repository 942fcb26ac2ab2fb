"""JsonWriter: experiences as JSON-lines files, one batch per line (`ray.rllib.offline.json_writer`)."""
from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any, Iterable

from rlx.offline.batch_codec import to_json
from rlx.offline.io_context import IOContext
from rlx.offline.output_writer import OutputWriter

logger = logging.getLogger("rlx")

DEFAULT_MAX_FILE_SIZE = 64 * 1024 * 1024


def local_directory(path: str, what: str) -> str:
    """`path` as an absolute local directory (created if missing); a ConfigError for URIs."""
    from rlx.utils.errors import ConfigError

    path = os.fspath(path)
    scheme = path.split("://", 1)[0] if "://" in path else ""
    if scheme and scheme != "file":
        raise ConfigError(f"{what} {path!r} is a {scheme}:// URI; rlx writes and reads local files only. "
                          "Give a local directory (and copy the files to the bucket yourself).")
    if scheme == "file":
        path = path[len("file://"):]
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"{what} {path!r} is a file; it must be a directory to write output files into.")
    os.makedirs(path, exist_ok=True)
    return path


def output_file_name(ioctx: IOContext, file_index: int, extension: str) -> str:
    """RLlib's output file name: output-<date>_worker-<worker index>_<file index>.<extension>."""
    stamp = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
    return f"output-{stamp}_worker-{ioctx.worker_index}_{file_index}.{extension}"


class JsonWriter(OutputWriter):
    """Writes each batch as one line of JSON into files under `path`, starting a new file once
    one holds `max_file_size` bytes.

    Args:
        path: the output directory (created if missing).
        ioctx: the IOContext (its worker_index goes into the file names).
        max_file_size: bytes after which the next batch goes into a new file.
        compress_columns: columns stored compressed (see rlx.offline.compression); the
            others are JSON lists of row values.
    """

    def __init__(self, path: str, ioctx: IOContext | None = None, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 compress_columns: Iterable[str] = frozenset(["obs", "new_obs"])):
        self.ioctx = ioctx or IOContext()
        self.path = local_directory(path, "output")
        self.max_file_size = int(max_file_size)
        self.compress_columns = frozenset(compress_columns)
        self.file_index = 0
        self.bytes_written = 0
        self.cur_file: Any = None
        #: Paths of the files written so far.
        self.files: list[str] = []

    def write(self, sample_batch: Any) -> None:
        """Append `sample_batch` (a flat SampleBatch or MultiAgentBatch) as one line."""
        line = to_json(sample_batch, self.compress_columns)
        f = self._get_file()
        f.write(line)
        f.write("\n")
        f.flush()
        self.bytes_written += len(line) + 1

    def _get_file(self) -> Any:
        if self.cur_file is None or self.bytes_written >= self.max_file_size:
            if self.cur_file is not None:
                self.cur_file.close()
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

    def close(self) -> None:
        """Close the current file."""
        if self.cur_file is not None:
            self.cur_file.close()
            self.cur_file = None

    def __repr__(self) -> str:
        return f"JsonWriter(path={self.path!r}, files={len(self.files)})"
