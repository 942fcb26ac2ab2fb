"""Live training progress of `rlx train`: one line per iteration, and a progress bar of the
iteration under way (drawn by rich, see rlx.utils.progress)."""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Mapping, TextIO

from rlx.cli.stop import canonical_key, lookup
from rlx.utils.progress import ProgressGoal, TrainingProgress, set_active_progress


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


#: Stop keys (as rlx names them, see rlx.cli.stop.canonical_key) a progress bar can count toward.
_GOAL_KEYS = {
    "num_env_steps_sampled_lifetime": "env_steps",
    "env_runners/num_env_steps_sampled_lifetime": "env_steps",
    "training_iteration": "iterations",
    "time_total_s": "time_s",
}


def progress_goal(stop: Mapping[str, Any] | None) -> ProgressGoal | None:
    """The goal of the progress bar for stop criteria `stop`: the first criterion that is an env
    step count, an iteration count or a training time (None when there is none: the bar then
    counts toward the end of each iteration)."""
    for key, bound in (stop or {}).items():
        kind = _GOAL_KEYS.get(canonical_key(str(key)))
        if kind is not None and isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > 0:
            return ProgressGoal(kind, float(bound))
    return None


class ProgressReporter:
    """Prints training progress to `stream`: one line per iteration, and a progress bar of the
    iteration under way (rlx.utils.progress: env steps, updates, %, rate and ETA toward the
    stop criterion `goal`), which every `train()` of this process reports to.

    On a terminal the bar is redrawn in place below the iteration lines (those at most once a
    second, the last one always); elsewhere every iteration's line is printed, and the bar's
    text every 30 s of a long iteration. `note()` prints a message (a checkpoint was saved)
    above the bar. Call `finish()` at the end."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None, goal: ProgressGoal | None = None):
        self.stream = stream if stream is not None else sys.stdout
        self.live = wants_live_progress(self.stream) if live is None else live
        self.started = time.monotonic()
        self._pending = ""  # an iteration line not printed yet (live: at most one a second)
        self._last_print = 0.0
        self.bar = TrainingProgress(goal, stream=self.stream, live=self.live)
        self.bar.start()
        self._previous = set_active_progress(self.bar)

    def update(self, result: dict[str, Any]) -> None:
        """Show the status after `result`."""
        line = progress_line(result, self.started)
        if not self.live:
            self._write(line + "\n")
            return
        self._pending = line
        now = time.monotonic()
        if now - self._last_print >= 1.0:
            self._flush_pending()
            self._last_print = now

    def note(self, message: str) -> None:
        """Print `message` on its own line."""
        if self.live:
            self._flush_pending()
            self.bar.print(message)
        else:
            self._write(message + "\n")

    def finish(self) -> None:
        """Print the last iteration's line and stop the bar (left on screen on a terminal)."""
        if self.live:
            self._flush_pending()
        self.bar.stop()
        set_active_progress(self._previous)

    def _flush_pending(self) -> None:
        if self._pending:
            self.bar.print(self._pending)
            self._pending = ""

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
