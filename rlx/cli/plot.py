"""`rlx plot`: learning curves of every trial under a results directory, saved as an image.

A trial is a directory holding `progress.csv` (flat keys such as
`env_runners/episode_return_mean`) or `result.json` (one nested JSON object per line);
progress.csv is read when both are there. matplotlib is imported only when drawing.
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from rlx.utils.errors import ConfigError, did_you_mean, install_hint

logger = logging.getLogger(__name__)

PROGRESS_FILE = "progress.csv"
RESULT_FILE = "result.json"
TRIAL_FILES = (PROGRESS_FILE, RESULT_FILE)

DEFAULT_METRIC = "env_runners/episode_return_mean"
#: Used for a trial that lacks DEFAULT_METRIC (results written by the old API stack).
LEGACY_METRIC = "episode_reward_mean"
DEFAULT_X_KEY = "num_env_steps_sampled_lifetime"
#: Used, in order, for a trial that lacks DEFAULT_X_KEY when --x was left at its default.
LEGACY_X_KEYS = ("timesteps_total", "training_iteration")
DEFAULT_OUT_NAME = "learning_curves.png"
#: With more curves than this the figure has no legend (the printed lines name the trials).
MAX_LEGEND_ENTRIES = 20

MATPLOTLIB_MISSING = f"rlx plot needs matplotlib: {install_hint('plot')}"


@dataclass
class Trial:
    """The results of one trial: `rows` are flat dicts (nested keys joined by '/')."""

    name: str
    path: Path
    source: Path
    rows: list[dict[str, Any]]
    keys: set[str] = field(default_factory=set)


@dataclass
class Curve:
    """The (x, y) points of one trial's metric, NaN and empty values left out."""

    name: str
    metric: str
    x_key: str
    points: list[tuple[float, float]]


# ---------------------------------------------------------------------------------------------
# Finding and reading trials
# ---------------------------------------------------------------------------------------------

def is_trial_dir(path: Path) -> bool:
    """Whether `path` holds a progress.csv or a result.json."""
    return any((path / name).is_file() for name in TRIAL_FILES)


def find_trial_dirs(results_dir: str | os.PathLike) -> list[Path]:
    """`results_dir` itself and every directory below it that holds a trial's results, sorted."""
    root = Path(results_dir)
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames.sort()
        if is_trial_dir(Path(dirpath)):
            found.append(Path(dirpath))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def flatten(result: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(key, value) of every leaf of a nested dict, nested keys joined by '/'."""
    for key, value in result.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            yield from flatten(value, name)
        else:
            yield name, value


def read_progress_csv(path: str | os.PathLike) -> tuple[list[dict[str, Any]], set[str]]:
    """The rows of a progress.csv (cells as strings) and its header's keys."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = [dict(row) for row in reader]
        keys = set(reader.fieldnames or [])
    return rows, keys


def read_result_json(path: str | os.PathLike) -> tuple[list[dict[str, Any]], set[str]]:
    """The lines of a result.json, flattened, and the union of their keys.

    A line that is not a JSON object (such as one cut short by a crash) is skipped.
    """
    rows: list[dict[str, Any]] = []
    keys: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                logger.info("%s line %d is not valid JSON; skipped", path, number)
                continue
            if not isinstance(result, dict):
                continue
            row = dict(flatten(result))
            rows.append(row)
            keys.update(row)
    return rows, keys


def trial_name(trial_dir: Path, results_dir: Path) -> str:
    """The legend label of a trial: its path relative to `results_dir`, or its own name."""
    relative = trial_dir.relative_to(results_dir).as_posix()
    return relative if relative != "." else results_dir.resolve().name


def load_trial(trial_dir: str | os.PathLike, results_dir: str | os.PathLike | None = None) -> Trial:
    """Read one trial, from progress.csv when it has rows, else from result.json."""
    trial_dir = Path(trial_dir)
    root = Path(results_dir) if results_dir is not None else trial_dir
    name = trial_name(trial_dir, root)
    csv_path, json_path = trial_dir / PROGRESS_FILE, trial_dir / RESULT_FILE
    if csv_path.is_file():
        rows, keys = read_progress_csv(csv_path)
        if rows or not json_path.is_file():
            return Trial(name, trial_dir, csv_path, rows, keys)
    rows, keys = read_result_json(json_path)
    return Trial(name, trial_dir, json_path, rows, keys)


# ---------------------------------------------------------------------------------------------
# Turning rows into points
# ---------------------------------------------------------------------------------------------

def to_number(value: Any) -> float | None:
    """`value` as a finite float, or None when it is empty, null, NaN, infinite or not a number."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "false"):
            return 1.0 if text.lower() == "true" else 0.0
        try:
            value = float(text)
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def extract_points(rows: Iterable[dict[str, Any]], metric: str, x_key: str) -> list[tuple[float, float]]:
    """(x, metric) of every row where both are numbers; rows with an empty or NaN value are skipped."""
    points = []
    for row in rows:
        x, y = to_number(row.get(x_key)), to_number(row.get(metric))
        if x is not None and y is not None:
            points.append((x, y))
    return points


def choose_key(keys: set[str], requested: str | None, default: str, fallbacks: Iterable[str]) -> str | None:
    """The key a trial is plotted with: `requested` if given (None when the trial lacks it), else
    `default` or the first of `fallbacks` the trial has."""
    if requested is not None:
        return requested if requested in keys else None
    for key in (default, *fallbacks):
        if key in keys:
            return key
    return None


def lower_is_better(metric: str) -> bool:
    """Whether smaller values of `metric` are better (losses and errors)."""
    name = metric.rsplit("/", 1)[-1].lower()
    return "loss" in name or "error" in name


def summarize(curve: Curve) -> str:
    """'NAME: N points, last V, best B' for one curve."""
    values = [y for _, y in curve.points]
    best = min(values) if lower_is_better(curve.metric) else max(values)
    how = "min" if lower_is_better(curve.metric) else "max"
    text = f"{curve.name}: {len(values)} points, last {values[-1]:.6g}, best ({how}) {best:.6g}"
    if curve.metric == LEGACY_METRIC:
        text += f" [{LEGACY_METRIC}]"
    return text


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------

def load_trials(results_dir: Path) -> list[Trial]:
    """Every trial under `results_dir`; raises a one-line error when there is none."""
    if not results_dir.exists():
        raise ConfigError(f"results directory {str(results_dir)!r} does not exist")
    if not results_dir.is_dir():
        raise ConfigError(f"{str(results_dir)!r} is a file, not a directory; pass the directory holding it")
    trial_dirs = find_trial_dirs(results_dir)
    if not trial_dirs:
        raise ConfigError(f"no trials found under {str(results_dir)!r}: looked for {' or '.join(TRIAL_FILES)} "
                          "in it and every directory below it")
    return [load_trial(path, results_dir) for path in trial_dirs]


def _missing_key_error(what: str, key: str, trials: list[Trial], results_dir: Path) -> ConfigError:
    available = sorted(set().union(*(t.keys for t in trials)))
    return ConfigError(f"{what} {key!r} is in none of the {len(trials)} trial(s) under {str(results_dir)!r}."
                       f"{did_you_mean(key, available)} Every key is in the header of a trial's {PROGRESS_FILE}; "
                       "nested keys are written a/b.")


def build_curves(trials: list[Trial], metric: str | None, x_key: str, results_dir: Path) -> list[Curve]:
    """One curve per trial that has points; raises when the metric or x key is in no trial."""
    with_rows = [t for t in trials if t.rows]
    if not with_rows:
        raise ConfigError(f"the {len(trials)} trial(s) under {str(results_dir)!r} have no results yet")
    x_fallbacks = LEGACY_X_KEYS if x_key == DEFAULT_X_KEY else ()
    metrics = {t.name: choose_key(t.keys, metric, DEFAULT_METRIC, (LEGACY_METRIC,)) for t in with_rows}
    xs = {t.name: choose_key(t.keys, None, x_key, x_fallbacks) for t in with_rows}
    if not any(metrics.values()):
        raise _missing_key_error("metric", metric or DEFAULT_METRIC, with_rows, results_dir)
    if not any(xs.values()):
        raise _missing_key_error("x key", x_key, with_rows, results_dir)
    curves = []
    for trial in with_rows:
        m, x = metrics[trial.name], xs[trial.name]
        points = extract_points(trial.rows, m, x) if m and x else []
        if points:
            curves.append(Curve(trial.name, m, x, points))
        else:
            print(f"{trial.name}: skipped, no values of {m or metric or DEFAULT_METRIC} against {x or x_key}")
    if not curves:
        raise ConfigError(f"no values of {metric or DEFAULT_METRIC} to plot yet in any trial under "
                          f"{str(results_dir)!r} (returns stay empty until the first episode ends)")
    return curves


def import_pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ConfigError(MATPLOTLIB_MISSING) from err
    return plt


def _joined(values: Iterable[str]) -> str:
    return " / ".join(dict.fromkeys(values))


def draw(curves: list[Curve], out: Path) -> None:
    """Plot every curve on one figure and save it to `out`."""
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    try:
        for curve in curves:
            xs, ys = zip(*curve.points)
            ax.plot(xs, ys, marker="." if len(xs) < 50 else None, label=curve.name)
        ax.set_title(_joined(c.metric for c in curves))
        ax.set_xlabel(_joined(c.x_key for c in curves))
        ax.set_ylabel(_joined(c.metric.rsplit("/", 1)[-1] for c in curves))
        ax.grid(True, alpha=0.3)
        if len(curves) <= MAX_LEGEND_ENTRIES:
            ax.legend(fontsize="small", loc="best")
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out)
    finally:
        plt.close(fig)


def run_plot_command(args: argparse.Namespace) -> int:
    """Plot `args.metric` against `args.x_key` for every trial under `args.results_dir`, save the
    figure to `args.out` (default: learning_curves.png there) and print a line per trial."""
    results_dir = Path(args.results_dir).expanduser()
    x_key = getattr(args, "x_key", None) or DEFAULT_X_KEY
    trials = load_trials(results_dir)
    for trial in trials:
        logger.info("%s: %d rows read from %s", trial.name, len(trial.rows), trial.source)
    curves = build_curves(trials, args.metric, x_key, results_dir)
    out = Path(args.out).expanduser() if args.out else results_dir / DEFAULT_OUT_NAME
    draw(curves, out)
    for curve in curves:
        print(summarize(curve))
    if len(curves) > MAX_LEGEND_ENTRIES:
        print(f"(no legend: more than {MAX_LEGEND_ENTRIES} trials; plot a subdirectory to tell them apart)")
    print(f"Wrote {out} ({_joined(c.metric for c in curves)} of {len(curves)} trial(s))")
    return 0
