"""A progress bar of training, drawn with rich: env steps sampled and gradient updates done
while an iteration runs, with %, rate and ETA toward a goal (a stop criterion's env steps,
iterations or seconds; without one, the iteration's own size).

`rlx train` shows it on a terminal (rlx.cli.progress). A Python user turns it on for
`algo.train()` with `config.reporting(progress_bar=True)` or the environment variable
`RLX_PROGRESS_BAR=1`: each `train()` call then draws the bar while it runs and leaves its
final line. The counts come from rlx.utils.progress_events, which the sampling and learning
loops report to; rich is imported only when a bar is shown.
"""
from __future__ import annotations

import dataclasses
import io
import os
import threading
import time
from typing import Any, TextIO

from rlx.utils.progress_events import ProgressListener, listening

#: The environment variable that turns the bar on for every `train()` call ("1", "true", "yes").
PROGRESS_BAR_ENV = "RLX_PROGRESS_BAR"
#: Without a terminal, a long iteration prints the bar's text this often (seconds).
PLAIN_LINE_EVERY_S = 30.0

#: The kinds of goal a bar can count toward.
GOAL_KINDS = ("env_steps", "iterations", "time_s")


@dataclasses.dataclass(frozen=True)
class ProgressGoal:
    """What the bar's % and ETA count toward: `total` env steps sampled (lifetime), training
    iterations, or seconds of training (`kind` is one of GOAL_KINDS)."""

    kind: str
    total: float

    def __post_init__(self) -> None:
        if self.kind not in GOAL_KINDS:
            raise ValueError(f"ProgressGoal kind {self.kind!r}: use one of {', '.join(GOAL_KINDS)}.")


def expected_iteration_size(config: Any) -> tuple[int | None, float | None]:
    """`(env steps, seconds)` one `train()` call of `config` is expected to take, as far as the
    config tells: min_sample_timesteps_per_iteration when set (off-policy algorithms), else
    min_time_s_per_iteration when set (asynchronous ones: the steps are then unknown), else the
    train batch (on-policy ones)."""
    steps = int(getattr(config, "min_sample_timesteps_per_iteration", 0) or 0)
    seconds = float(getattr(config, "min_time_s_per_iteration", 0) or 0)
    if not steps and not seconds:
        steps = int(getattr(config, "total_train_batch_size", 0) or getattr(config, "train_batch_size", 0) or 0)
    return steps or None, seconds or None


def progress_bar_requested(config: Any) -> bool:
    """Whether `train()` should draw a bar: config.reporting(progress_bar=True) or RLX_PROGRESS_BAR=1."""
    if bool(getattr(config, "progress_bar", False)):
        return True
    return os.environ.get(PROGRESS_BAR_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _clock(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "-:--:--"
    seconds = int(max(0.0, seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class TrainingProgress(ProgressListener):
    """The bar: counts env steps and updates (a ProgressListener), and draws itself with rich.

    One line: "iter N ━━━━━━╺━━━━━ 42% | 1,234 steps/s | ETA 0:01:05 | 2,048/4,096 steps, 16 updates".
    While started it redraws on `stream` (default stdout) as a terminal with `live=True`, as rich
    decides with `live=None`; with `live=False` it prints its text every PLAIN_LINE_EVERY_S
    seconds of a long iteration instead (a log file). `text()` renders it as
    plain text (for logs and tests). Counting is two integer additions, so the sampling
    loop's speed does not change; the figures are computed when the bar is drawn.
    """

    def __init__(self, goal: ProgressGoal | None = None, stream: TextIO | None = None, live: bool | None = None,
                 plain_every_s: float = PLAIN_LINE_EVERY_S):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
        from rich.table import Column

        self.goal = goal
        self.stream = stream
        self.live = live
        self.env_steps = 0  # this iteration's
        self.updates = 0  # this iteration's
        self._run_steps = 0  # since the bar was made: the rate's numerator
        self._made = time.monotonic()
        self._iteration = 0
        self._iter_started: float | None = None
        self._iter_ended: float | None = None  # set when the iteration ended: its figures stay as they were
        self._base_steps = 0
        self._base_time = 0.0
        self._expected_steps: int | None = None
        self._expected_s: float | None = None
        self._goal_at_start: float | None = None
        # live=None: rich decides (on no terminal it prints the bar once, when stopped).
        console = Console(file=stream, force_terminal=True if live else None)
        owner = self

        class _Bar(Progress):
            def get_renderable(self) -> Any:
                owner._sync()
                return super().get_renderable()

        def text(field: str) -> Any:  # columns cut short rather than wrap: the bar stays one line
            return TextColumn(field, table_column=Column(no_wrap=True, overflow="ellipsis"))

        self._progress = _Bar(text("{task.description}"), BarColumn(bar_width=20), TaskProgressColumn(),
                              text("{task.fields[rate]}"), text("{task.fields[eta]}"), text("{task.fields[counts]}"),
                              console=console, refresh_per_second=4, redirect_stdout=False, redirect_stderr=False)
        self._task = self._progress.add_task("iter 0", total=None, rate="", eta="", counts="")
        self._started = False
        self._plain_every_s = plain_every_s
        self._plain_stop = threading.Event()
        self._plain_thread: threading.Thread | None = None

    # ------------------------------------------------------------ events

    def on_env_steps(self, n: int) -> None:
        """Count `n` env steps sampled (called by the sampling loops)."""
        self.env_steps += n
        self._run_steps += n

    def on_updates(self, n: int) -> None:
        """Count `n` gradient updates (called by the learner)."""
        self.updates += n

    def begin_iteration(self, iteration: int, lifetime_steps: int, time_total_s: float,
                        expected_steps: int | None = None, expected_s: float | None = None) -> None:
        """Iteration `iteration` (1-based) starts, after `lifetime_steps` env steps and
        `time_total_s` seconds of training; it is expected to sample `expected_steps` steps
        or to run `expected_s` seconds (when known)."""
        self._iteration = int(iteration)
        self._base_steps = int(lifetime_steps)
        self._base_time = float(time_total_s)
        self._expected_steps = expected_steps
        self._expected_s = expected_s
        self.env_steps = 0
        self.updates = 0
        self._iter_started = time.monotonic()
        self._iter_ended = None
        if self._goal_at_start is None:
            self._goal_at_start = self._goal_completed()[0]

    def end_iteration(self) -> None:
        """The iteration ended: the bar shows it complete until the next one starts."""
        self._iter_ended = time.monotonic()
        self._sync()

    # ------------------------------------------------------------ showing

    def start(self) -> None:
        """Start redrawing (live) or printing a plain line during long iterations (not live)."""
        if self._started:
            return
        self._started = True
        if self.live is not False:
            self._progress.start()
        elif self._plain_every_s > 0 and self.stream is not None:
            self._plain_thread = threading.Thread(target=self._print_plain_lines, name="rlx-progress", daemon=True)
            self._plain_thread.start()

    def stop(self) -> None:
        """Stop drawing, leaving the bar's last line on screen (live)."""
        if not self._started:
            return
        self._started = False
        if self.live is not False:
            self._progress.stop()
        self._plain_stop.set()
        if self._plain_thread is not None:
            self._plain_thread.join(timeout=5)
            self._plain_thread = None

    def print(self, message: str) -> None:
        """Print `message` on its own line (above the bar while it is drawn)."""
        self._progress.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def text(self) -> str:
        """The bar as plain text, one line."""
        from rich.console import Console

        self._sync()
        out = io.StringIO()
        Console(file=out, width=160, force_terminal=False, color_system=None, no_color=True).print(
            self._progress.make_tasks_table(self._progress.tasks))
        return out.getvalue().rstrip()

    def listening(self) -> Any:
        """A context in which this thread's sampling and learning report to this bar."""
        return listening(self)

    def _print_plain_lines(self) -> None:
        while not self._plain_stop.wait(self._plain_every_s):
            started = self._iter_started if self._iter_ended is None else None
            if started is not None and time.monotonic() - started >= self._plain_every_s and self.stream is not None:
                self.stream.write("  " + self.text().strip() + "\n")
                self.stream.flush()

    # ------------------------------------------------------------ figures

    def _goal_completed(self) -> tuple[float, float | None]:
        """(completed, total) toward the goal, or toward the iteration's size without one."""
        now = time.monotonic()
        in_iter = self._time_in_iteration()
        goal = self.goal
        if goal is not None and goal.kind == "env_steps":
            return float(self._base_steps + self.env_steps), goal.total
        if goal is not None and goal.kind == "time_s":
            return self._base_time + in_iter, goal.total
        fraction = self._iteration_fraction(in_iter)
        if goal is not None:  # iterations
            done = self._iteration - 1 + (fraction or 0.0) if self._iter_ended is None else self._iteration
            return float(done), goal.total
        if self._expected_steps:
            return float(self.env_steps), float(self._expected_steps)
        if self._expected_s:
            return in_iter, self._expected_s
        return float(self.env_steps), None

    def _iteration_fraction(self, in_iter: float) -> float | None:
        if self._expected_steps:
            return min(1.0, self.env_steps / self._expected_steps)
        if self._expected_s:
            return min(1.0, in_iter / self._expected_s)
        return None

    def _time_in_iteration(self) -> float:
        if self._iter_started is None:
            return 0.0
        return (self._iter_ended if self._iter_ended is not None else time.monotonic()) - self._iter_started

    def _sync(self) -> None:
        """Bring the rich task up to date with the counts (when drawn, not when counted)."""
        if getattr(self, "_task", None) is None:  # rich draws once while the bar is being made
            return
        completed, total = self._goal_completed()
        final = self._iter_ended is not None
        if final and self.goal is None and total is not None:
            completed = max(completed, total)
        elapsed = max(time.monotonic() - self._made, 1e-9)
        rate = self._run_steps / elapsed
        eta = None
        if total is not None:
            if self.goal is not None and self.goal.kind == "env_steps":
                eta = (total - completed) / rate if rate > 0 else None
            else:
                done = completed - (self._goal_at_start or 0.0) if self.goal is not None else completed
                span = elapsed if self.goal is not None else max(self._time_in_iteration(), 1e-9)
                pace = done / span if span > 0 else 0.0
                eta = (total - completed) / pace if pace > 0 else None
        steps = f"{self.env_steps:,}" + (f"/{self._expected_steps:,}" if self._expected_steps else "")
        self._progress.update(
            self._task, completed=min(completed, total) if total is not None else completed, total=total,
            description=f"iter {max(self._iteration, 1)}", rate=f"{rate:,.0f} steps/s",
            eta=f"ETA {_clock(0.0 if final and total is not None and completed >= total else eta)}",
            counts=f"{steps} steps, {self.updates:,} updates",
        )


#: The bar `rlx train` shows, which `train()` reports to instead of drawing its own.
_ACTIVE: TrainingProgress | None = None


def set_active_progress(progress: TrainingProgress | None) -> TrainingProgress | None:
    """Make `progress` the bar every `train()` of this process reports to (None: none);
    returns the one active before."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, progress
    return previous


class IterationProgress:
    """What one `train()` call does for the progress bar: report to the active bar (the CLI's),
    or draw one of its own when the config asks, or nothing at all. Made by `begin`,
    finished by `end`."""

    def __init__(self, bar: TrainingProgress | None, owned: bool):
        self.bar = bar
        self._owned = owned
        self._listening: Any = None
        if bar is not None:
            self._listening = bar.listening()
            self._listening.__enter__()

    @classmethod
    def begin(cls, config: Any, iteration: int, lifetime_steps: int, time_total_s: float) -> "IterationProgress":
        """Start showing iteration `iteration` of an Algorithm with `config`."""
        bar, owned = _ACTIVE, False
        if bar is None and progress_bar_requested(config):
            bar, owned = TrainingProgress(), True
        if bar is not None:
            bar.begin_iteration(iteration, lifetime_steps, time_total_s, *expected_iteration_size(config))
            if owned:
                bar.start()
        return cls(bar, owned)

    def end(self) -> None:
        """The iteration is over: stop reporting (and drawing, for a bar of its own)."""
        if self.bar is None:
            return
        self._listening.__exit__(None, None, None)
        self.bar.end_iteration()
        if self._owned:
            self.bar.stop()
