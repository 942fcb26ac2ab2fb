"""`rlx train` with search spaces in its config: the sweep runs through Ray Tune.

`rlx train --algo PPO --env CartPole-v1 --config '{"lr": {"grid_search": [1e-3, 1e-4]}}'`
(or an experiment file whose config holds `grid_search` values, or tune.uniform & co. in a
Python file) runs one Tune trial per grid point with the command's stop criteria and
checkpoint settings, then prints one line per trial and the best trial's summary with
its checkpoint and the `rlx evaluate` command.

Results land in `<storage path>/<experiment name>/` (default ~/rlx_results/default/),
Tune's layout: one directory per trial with result.json, progress.csv, TensorBoard
events, params.json and its `checkpoint_NNNNNN` directories (rlx checkpoints).
"""
from __future__ import annotations

import copy
import json
import logging
import math
import shlex
from pathlib import Path
from typing import Any, TextIO

import ray
from ray import tune

import rlx.tune  # noqa: F401 - registers rlx's algorithms and envs with Tune
from rlx.cli.experiments import ExperimentSpec
from rlx.cli.names import check_dir_name
from rlx.cli.stop import StopCriteria, lookup
from rlx.cli.outcome import (DEFAULT_EXPERIMENT_NAME, RETURN_KEY, RunSettings, TrialOutcome, env_label, first,
                             print_summary, record)
from rlx.loggers.creation import results_root
from rlx.tune.trainable import trainable
from rlx.utils.errors import ConfigError, RLXError


class SweepError(RLXError):
    """Trials of an `rlx train` sweep failed (each is listed with its error above)."""


class CriteriaStopper(tune.Stopper):
    """Tune stopper with `rlx train`'s stop semantics (rlx.cli.stop.StopCriteria): a trial
    stops when any criterion is reached; bare keys are also looked up under env_runners/.
    A key that is no result key stops the whole sweep; `error` then says why."""

    def __init__(self, criteria: dict[str, Any] | None):
        self.criteria = dict(criteria or {})
        StopCriteria(self.criteria)  # bounds must be numbers: fail before anything starts
        self._per_trial: dict[str, StopCriteria] = {}
        self.error: ConfigError | None = None

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        criteria = self._per_trial.setdefault(trial_id, StopCriteria(self.criteria))
        try:
            return bool(criteria.met(result))
        except ConfigError as err:
            self.error = self.error or err
            return True

    def stop_all(self) -> bool:
        return self.error is not None


class TrialLines(tune.Callback):
    """One line when a trial starts, finishes or fails (instead of Tune's tables)."""

    def __init__(self, searched: list[str], out: TextIO):
        self.searched = searched
        self.out = out

    def _line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._line(f"  started   {_params_label(trial.config, self.searched)}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        ret = lookup(result, RETURN_KEY)
        ret = float(ret) if isinstance(ret, (int, float)) else None
        self._line(f"  finished  {_params_label(trial.config, self.searched)}: "
                   f"{result.get('training_iteration', 0)} iterations, return {_fmt_return(ret)}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # The error itself is in the summary (Tune writes it to error.txt after this call).
        self._line(f"  failed    {_params_label(trial.config, self.searched)}")


def run_sweep(spec: ExperimentSpec, settings: RunSettings, config: Any, out: TextIO) -> TrialOutcome:
    """Run the sweep `config` (an AlgorithmConfig holding search spaces) with Ray Tune; print
    a line per trial and the best trial's summary; return the best trial's outcome."""
    if settings.restore:
        raise ConfigError("--restore continues one trial and cannot be combined with a grid_search sweep; "
                          "remove the grid_search values or --restore.")
    algo_cls = config.algo_class
    algo_name = getattr(algo_cls, "__name__", str(algo_cls))
    searched = config.search_space_keys()
    criteria = settings.stop if settings.stop is not None else spec.stop
    if not criteria:
        raise ConfigError("A sweep needs stop criteria (--stop or the experiment's stop), e.g. "
                          "--stop '{\"training_iteration\": 50}': without them the first trials would run until "
                          "Ctrl-C and the others never start.")
    stopper = CriteriaStopper(criteria)
    StopCriteria(criteria).check_before_training(config)
    storage = Path(settings.storage_path or spec.storage_path or results_root()).expanduser().resolve()
    experiment_name = check_dir_name(settings.experiment_name or spec.name or DEFAULT_EXPERIMENT_NAME,
                                     "experiment name")
    checkpoint_freq = first(settings.checkpoint_freq, spec.checkpoint_freq, 0)
    checkpoint_at_end = first(settings.checkpoint_at_end, spec.checkpoint_at_end, True)
    keep = first(settings.keep_checkpoints_num, spec.keep_checkpoints_num, None)

    param_space = config.to_dict()
    _check_variants(trainable(algo_cls), param_space, searched)
    out.write(f"Sweeping {algo_name} on {env_label(config.env)} over {', '.join(searched)} with Ray Tune; "
              f"results in {storage / experiment_name}\n")
    out.write(f"Each trial stops at: {StopCriteria(criteria).describe()}\n")
    out.flush()
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=settings.verbose > 0, logging_level=logging.WARNING)
    tuner = tune.Tuner(
        trainable(algo_cls),
        param_space=param_space,
        run_config=tune.RunConfig(
            name=experiment_name,
            storage_path=str(storage),
            stop=stopper,
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=checkpoint_freq, checkpoint_at_end=checkpoint_at_end, num_to_keep=keep,
                checkpoint_score_attribute=first(settings.checkpoint_score_attribute, spec.checkpoint_score_attribute),
                checkpoint_score_order=first(settings.checkpoint_score_order, spec.checkpoint_score_order, "max"),
            ),
            # Tune's own tables (every trial's whole config and result) only with -v.
            verbose=1 if settings.verbose else 0,
            callbacks=[TrialLines(searched, out)],
        ),
    )
    tune_logger = logging.getLogger("ray.tune")
    level = tune_logger.level
    if not settings.verbose:
        # Failed trials are reported by TrialLines and the summary, one line each; Tune's
        # tracebacks stay in each trial's error.txt (and show with -v).
        tune_logger.setLevel(logging.CRITICAL)
    try:
        grid = tuner.fit()
    finally:
        tune_logger.setLevel(level)
    if stopper.error is not None:
        raise stopper.error
    outcomes = [_outcome(result, algo_name, config.env, criteria) for result in grid]
    labels = [_params_label(result.config, searched) for result in grid]
    _print_trials(grid, outcomes, labels, out)
    ok = [i for i, result in enumerate(grid) if result.error is None]
    if not ok:
        raise SweepError(f"All {len(outcomes)} trials of the sweep failed; the first: {_first_line(grid[0].error)}")
    best = max(ok, key=lambda i: _score(outcomes[i]))
    out.write(f"Best trial: {labels[best]} (final return {_fmt_return(outcomes[best].final_return)})\n")
    print_summary(outcomes[best], out)
    failed = len(outcomes) - len(ok)
    if failed:
        raise SweepError(f"{failed} of {len(outcomes)} trials of the sweep failed (listed above); "
                         "their tracebacks are in error.txt in their trial directories.")
    return outcomes[best]


def _check_variants(trainable_cls: Any, param_space: dict[str, Any], searched: list[str]) -> None:
    """Validate the config of every grid point (random search spaces: one sample each) before
    starting Ray, so a setting that no trial could use fails at once, naming the trial."""
    try:
        from ray.tune.search.variant_generator import generate_variants
    except ImportError:  # pragma: no cover - a Tune without it: the trials report errors
        return
    for _, resolved in generate_variants(copy.deepcopy(param_space)):
        try:
            trainable_cls.make_config(resolved).validate()
        except ConfigError as err:
            raise ConfigError(f"In the sweep's trial {_params_label(resolved, searched)}: {err}") from err


def _outcome(result: Any, algo_name: str, env: Any, criteria: dict[str, Any] | None) -> TrialOutcome:
    outcome = TrialOutcome(algo=algo_name, env=env, trial_dir=Path(result.path))
    if result.error is not None:
        outcome.stop_reason = f"failed: {_first_line(result.error)}"
        return outcome
    history = result.metrics_dataframe
    if history is not None:
        for row in history.to_dict("records"):
            record(row, outcome)
    if result.metrics and "training_iteration" in result.metrics:
        record(result.metrics, outcome)  # the last result, nested
        reached = StopCriteria(criteria).met(result.metrics) if criteria else []
        if reached:
            outcome.stop_reason = "reached " + " and ".join(reached)
    if result.checkpoint is not None:
        outcome.checkpoint = result.checkpoint.path
        outcome.checkpoints = [c.path for c, _ in (result.best_checkpoints or [])] or [outcome.checkpoint]
    return outcome


def _params_label(config: dict[str, Any], searched: list[str]) -> str:
    """'lr=0.001, model/fcnet_hiddens=[64]': a trial's values of the searched settings."""
    parts = []
    for path in searched:
        node: Any = config
        for part in path.split("/"):
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = None
        parts.append(f"{path}={json.dumps(node, default=str)}")
    return ", ".join(parts)


def _score(outcome: TrialOutcome) -> float:
    ret = outcome.final_return
    return -math.inf if ret is None or math.isnan(ret) else ret


def _fmt_return(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _first_line(error: Any) -> str:
    text = str(error).strip().splitlines()
    lines = [ln for ln in text if ln.strip()]
    # Tune wraps the trial's exception; its last line names it ("ConfigError: ...").
    return lines[-1].strip() if lines else type(error).__name__


def _print_trials(grid: Any, outcomes: list[TrialOutcome], labels: list[str], out: TextIO) -> None:
    width = max(len(label) for label in labels) if labels else 0
    out.write(f"\nSweep finished: {len(outcomes)} trials\n")
    for label, outcome, result in zip(labels, outcomes, grid):
        if result.error is not None:
            out.write(f"  {label.ljust(width)}  failed: {_first_line(result.error)}\n")
            continue
        ckpt = shlex.quote(outcome.checkpoint) if outcome.checkpoint else "no checkpoint"
        out.write(f"  {label.ljust(width)}  {outcome.iterations} iterations, return "
                  f"{_fmt_return(outcome.final_return)}, checkpoint {ckpt}\n")
    out.flush()

