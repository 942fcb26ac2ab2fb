"""CSVLogger: progress.csv, one row per result with every scalar under its flat key."""
from __future__ import annotations

import csv
import os
from typing import Any

from rlx.loggers.logger import Logger, close_quietly, flatten_result, is_scalar, json_safe

PROGRESS_FILE = "progress.csv"


class CSVLogger(Logger):
    """Writes `progress.csv`: a header of flat keys (`env_runners/episode_return_mean`) and a
    row per result. Lists (such as `hist_stats`) are left out: they do not fit a cell.

    When a later result brings new keys (evaluation results appear at the first
    evaluation), the file is rewritten once with the wider header, earlier rows keeping
    empty cells for the new columns.
    """

    def _init(self) -> None:
        self._path = os.path.join(self.logdir, PROGRESS_FILE)
        self._fields: list[str] = []
        self._file: Any = None
        self._writer: Any = None
        with self._writing(PROGRESS_FILE):
            if os.path.exists(self._path) and os.path.getsize(self._path) > 0:
                with open(self._path, newline="", encoding="utf-8") as f:
                    self._fields = next(csv.reader(f), [])
            self._file = open(self._path, "a", newline="", encoding="utf-8")
            self._writer = csv.DictWriter(self._file, fieldnames=self._fields) if self._fields else None

    def on_result(self, result: dict[str, Any]) -> None:
        """Append one row (widening the header first if `result` has new keys)."""
        if self._file is None:
            return
        row = {k: json_safe(v) for k, v in flatten_result(result).items() if is_scalar(v)}
        new = [k for k in row if k not in self._fields]
        with self._writing(PROGRESS_FILE):
            if new or self._writer is None:
                self._widen(self._fields + new)
            self._writer.writerow(row)
            self._file.flush()

    def _widen(self, fields: list[str]) -> None:
        self._file.close()
        rows: list[dict[str, str]] = []
        if self._fields:
            with open(self._path, newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
        self._fields = fields
        tmp = self._path + ".tmp"
        try:
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerows(rows)
            os.replace(tmp, self._path)
        except OSError:
            _remove_quietly(tmp)  # progress.csv keeps its earlier rows
            raise
        self._file = open(self._path, "a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=fields)

    def flush(self) -> None:
        """Flush progress.csv."""
        if self._file is not None and not self._file.closed:
            with self._writing(PROGRESS_FILE):
                self._file.flush()

    def close(self) -> None:
        """Close progress.csv."""
        if self._file is not None:
            with self._writing(PROGRESS_FILE):
                self._file.close()
            self._file = None

    def _discard(self) -> None:
        file, self._file = self._file, None
        close_quietly(file)


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
