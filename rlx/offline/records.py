"""Records of offline files: what one JSON line or Parquet row holds, and files of a fixed number of them.

RLlib's `offline_data()` output settings decide what a record is and how many go into a file:

- `output_write_episodes=False`: records hold steps. A sampled batch is one record (a JSON line,
  a Parquet row group of one row per step), and its rows are steps.
- `output_write_episodes=True`: a record is one episode chunk, the steps of one episode in one
  sampled batch (the whole episode with `batch_mode="complete_episodes"`), and counts as one row.
- `output_max_rows_per_file=N`: records wait in a `RecordBuffer` until N rows are there and then
  fill a file of exactly N rows (a step record is split at the boundary); what is left when the
  writer closes is written only with `output_write_remaining_data=True`.

`RecordWriter` is the base of rlx's file writers (JSON lines, Parquet) that applies these; the
subclasses only encode records into files.
"""
from __future__ import annotations

import logging
from abc import ABCMeta, abstractmethod
from collections import deque
from typing import Any

import numpy as np

from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, batch_kind
from rlx.offline.output_writer import OutputWriter
from rlx.utils.errors import NotSupportedYetError

logger = logging.getLogger("rlx")

_EPISODE_KEYS = ("eps_id", "agent_index")
_DONE_KEYS = ("terminateds", "truncateds", "dones")


def episode_bounds(batch: Any) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each episode chunk of a flat batch: a chunk ends where `eps_id` (or
    `agent_index`) changes and after a terminated or truncated row."""
    n = len(batch)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cut = np.zeros(n, bool)  # cut[i]: a new chunk starts at row i
    cut[0] = True
    for key in _DONE_KEYS:
        if key in batch:
            cut[1:] |= np.asarray(batch[key], bool).reshape(n)[:-1]
    for key in _EPISODE_KEYS:
        if key in batch:
            ids = np.asarray(batch[key])
            cut[1:] |= ids[1:] != ids[:-1]
    starts = np.flatnonzero(cut)
    return starts, np.diff(np.append(starts, n))


def multi_agent_refusal(setting: str) -> Exception:
    """The NotSupportedYetError for `setting` (output_write_episodes=True or output_max_rows_per_file)
    with multi-agent output: RLlib's new stack, which has these settings, records no multi-agent data."""
    return NotSupportedYetError(
        f"{setting} with multi-agent output",
        "RLlib's new API stack, whose setting it is, records single-agent episodes only",
        fix="Leave output_write_episodes=False and output_max_rows_per_file=None: each sampled MultiAgentBatch is "
            "then one record (RLlib's old-stack format), and output_max_file_size starts new files.")


def check_multi_agent_output(config: Any) -> None:
    """Raise `multi_agent_refusal` when a multi-agent Algorithm's config writes episode records or
    files of a fixed number of rows with rlx's file writers."""
    get = config.get if hasattr(config, "get") else lambda key: getattr(config, key, None)
    output = get("output")
    if output is None or callable(output) and not isinstance(output, str):
        return
    if get("output_write_episodes"):
        raise multi_agent_refusal("output_write_episodes=True")
    if get("output_max_rows_per_file") is not None:
        raise multi_agent_refusal("output_max_rows_per_file")


def episode_records(batch: Any) -> list[SampleBatch]:
    """The episode chunks of a flat single-agent SampleBatch, each as its own SampleBatch.

    Raises NotSupportedYetError for a MultiAgentBatch, and ValueError for a batch that says
    neither where episodes change nor where they end (no eps_id and no terminateds column).
    """
    if batch_kind(batch) is MultiAgentBatch:
        raise multi_agent_refusal("output_write_episodes=True")
    if not any(key in batch for key in _EPISODE_KEYS + _DONE_KEYS):
        raise ValueError("output_write_episodes=True splits batches into episodes by their 'eps_id' and "
                         f"'terminateds'/'truncateds' columns, and this batch has neither (columns: {sorted(batch)}).")
    starts, lengths = episode_bounds(batch)
    return [take(batch, int(s), int(s + n)) for s, n in zip(starts, lengths)]


def take(batch: Any, start: int, stop: int) -> SampleBatch:
    """Rows [start, stop) of a flat SampleBatch."""
    return SampleBatch({k: v[start:stop] for k, v in batch.items()})


def records_of(batch: Any, episodes: bool) -> list[Any]:
    """The records a sampled batch makes: its episode chunks (`episodes`), or the batch itself."""
    if episodes:
        return episode_records(batch)
    if batch_kind(batch) is MultiAgentBatch or len(batch):
        return [batch]
    return []


def record_rows(record: Any, episodes: bool) -> int:
    """Rows a record counts for output_max_rows_per_file: 1 episode, or its steps."""
    return 1 if episodes else len(record)


class RecordBuffer:
    """Records waiting for a file of exactly `max_rows` rows.

    Args:
        max_rows: rows per file.
        episodes: whether records are episodes (one row each) or batches of steps (one row per step;
            the record that crosses a file boundary is split there).
    """

    def __init__(self, max_rows: int, episodes: bool):
        self.max_rows = int(max_rows)
        self.episodes = episodes
        self._pending: deque[Any] = deque()
        self.rows = 0

    def add(self, records: list[Any]) -> list[list[Any]]:
        """Buffer `records`; returns the files (lists of records) that are now full, in order."""
        for record in records:
            if batch_kind(record) is MultiAgentBatch:
                raise multi_agent_refusal("output_max_rows_per_file")
            self._pending.append(record)
            self.rows += record_rows(record, self.episodes)
        files = []
        while self.rows >= self.max_rows:
            files.append(self._take_file())
        return files

    def _take_file(self) -> list[Any]:
        out, rows = [], 0
        while rows < self.max_rows:
            record = self._pending.popleft()
            n = record_rows(record, self.episodes)
            if rows + n > self.max_rows:  # only step records count more than one row
                keep = self.max_rows - rows
                self._pending.appendleft(take(record, keep, n))
                record, n = take(record, 0, keep), keep
            out.append(record)
            rows += n
        self.rows -= rows
        return out

    def drain(self) -> list[Any]:
        """The records still waiting (fewer than `max_rows` rows); the buffer is empty afterwards."""
        out = list(self._pending)
        self._pending.clear()
        self.rows = 0
        return out


class RecordWriter(OutputWriter, metaclass=ABCMeta):
    """An OutputWriter that writes records into files, applying RLlib's output settings.

    Subclasses implement `_write_records(records)` (append them to the current file, opening one
    if none is open, a new one once it is `max_file_size` bytes long unless `max_rows_per_file`
    is set) and `_end_file()` (complete the current file; the next write opens a new one).

    Args:
        write_episodes: one record per episode chunk (True) or per written batch (False).
        max_rows_per_file: rows per file (None: files end by size, `max_file_size`).
        write_remaining_data: with `max_rows_per_file`, write the rows still buffered when the
            writer closes into a last, shorter file (False: they are dropped, as in RLlib).
    """

    def __init__(self, write_episodes: bool = False, max_rows_per_file: int | None = None,
                 write_remaining_data: bool = False):
        self.write_episodes = bool(write_episodes)
        self.max_rows_per_file = None if max_rows_per_file is None else int(max_rows_per_file)
        self.write_remaining_data = bool(write_remaining_data)
        self._buffer = None if self.max_rows_per_file is None else RecordBuffer(self.max_rows_per_file,
                                                                                 self.write_episodes)

    def write(self, sample_batch: Any) -> None:
        """Write `sample_batch` (a flat SampleBatch or MultiAgentBatch) as records."""
        records = records_of(sample_batch, self.write_episodes)
        if self._buffer is None:
            if records:
                self._write_records(records)
            return
        for file_records in self._buffer.add(records):
            self._end_file()
            self._write_records(file_records)
            self._end_file()

    def close(self) -> None:
        """Write (or drop, see `write_remaining_data`) the buffered rows and complete the current file."""
        if self._buffer is not None and self._buffer.rows:
            rows, remaining = self._buffer.rows, self._buffer.drain()
            if self.write_remaining_data:
                self._end_file()
                self._write_records(remaining)
            else:
                unit = "episode(s)" if self.write_episodes else "step(s)"
                logger.warning("Offline output: the last %d %s (fewer than output_max_rows_per_file=%d) were not "
                               "written; set output_write_remaining_data=True to write them into a last file.",
                               rows, unit, self.max_rows_per_file)
        self._end_file()

    @abstractmethod
    def _write_records(self, records: list[Any]) -> None:
        """Append `records` to the current file (opening one when none is open)."""

    @abstractmethod
    def _end_file(self) -> None:
        """Complete the current file, if one is open; the next write opens a new one."""
