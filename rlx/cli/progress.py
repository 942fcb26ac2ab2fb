"""Live training progress: one line per iteration, redrawn in place on a terminal."""
from __future__ import annotations

import math
import os
import shutil
import sys
import time
from typing import Any, TextIO

from rlx.cli.stop import lookup


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _fmt(value: float | None, width: int = 7) -> str:
    if value is None:
        return "-".rjust(width)
    if abs(value) >= 1000:
        return f"{value:,.0f}".rjust(width)
    return f"{value:.1f}".rjust(width)


def format_seconds(seconds: float) -> str:
    """'9.8 s', '2 min 05 s' or '1 h 02 min'."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def progress_line(result: dict[str, Any], started: float) -> str:
    """The status of one result: iteration, env steps, return mean (max), episode length,
    steps per second and elapsed time."""
    steps = int(result.get("num_env_steps_sampled_lifetime", 0) or 0)
    iter_steps = _number(result.get("num_env_steps_sampled_this_iter")) or 0.0
    iter_time = _number(result.get("time_this_iter_s")) or 0.0
    rate = iter_steps / iter_time if iter_time > 0 else 0.0
    ret = _number(lookup(result, "env_runners/episode_return_mean"))
    ret_max = _number(lookup(result, "env_runners/episode_return_max"))
    length = _number(lookup(result, "env_runners/episode_len_mean"))
    line = (
        f"iter {result.get('training_iteration', 0):>5} | steps {steps:>10,} | "
        f"return {_fmt(ret)} (max {_fmt(ret_max).strip()}) | ep len {_fmt(length).strip()} | "
        f"{rate:>8,.0f} steps/s | {format_seconds(time.monotonic() - started)}"
    )
    eval_ret = _number(lookup(result, "evaluation/env_runners/episode_return_mean"))
    if eval_ret is not None:
        line += f" | eval return {_fmt(eval_ret).strip()}"
    return line


def wants_live_progress(stream: TextIO) -> bool:
    """Whether `stream` is a terminal that can redraw a line in place."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM", "") != "dumb"


class ProgressReporter:
    """Prints training progress to `stream`: on a terminal one status line redrawn in place
    (at most 10 times a second), elsewhere one plain line per iteration. `note()` prints
    a message (a checkpoint was saved) without losing the status line."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stdout
        self.live = wants_live_progress(self.stream) if live is None else live
        self.started = time.monotonic()
        self._last_line = ""
        self._last_draw = 0.0
        self._on_screen = False

    def update(self, result: dict[str, Any]) -> None:
        """Show the status after `result`."""
        self._last_line = progress_line(result, self.started)
        if not self.live:
            self._write(self._last_line + "\n")
            return
        now = time.monotonic()
        if now - self._last_draw >= 0.1:
            self._draw()
            self._last_draw = now

    def note(self, message: str) -> None:
        """Print `message` on its own line."""
        if self.live and self._on_screen:
            self._write("\r\x1b[2K" + message + "\n")
            self._on_screen = False
            self._draw()
        else:
            self._write(message + "\n")

    def finish(self) -> None:
        """Leave the final status line on screen."""
        if self.live and self._last_line:
            self._draw()
            self._write("\n")
            self._on_screen = False

    def _draw(self) -> None:
        if not self._last_line:
            return
        # A line wider than the terminal wraps, and "\r" would then redraw only its tail.
        width = shutil.get_terminal_size((120, 24)).columns - 1
        self._write("\r\x1b[2K" + self._last_line[:max(width, 20)])
        self._on_screen = True

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
