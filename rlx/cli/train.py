"""`rlx train` and `rlx train file`: run experiments with stop criteria, checkpoints,
live progress and a closing summary."""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.checkpointing import checkpoint_algorithm_class, read_config, record_env_source
from rlx.algorithms.registry import get_algorithm_config
from rlx.cli.env_source import import_modules, rebuild_env_source, resolve_gymnasium_id
from rlx.cli.checkpoint_keeper import CheckpointKeeper
from rlx.cli.experiments import ExperimentSpec, is_url, load_experiment_file
from rlx.cli.names import check_dir_name
from rlx.cli.outcome import (DEFAULT_EXPERIMENT_NAME, RunSettings, TrialOutcome, env_label, first, print_summary,
                             record)
from rlx.cli.progress import ProgressReporter, progress_goal
from rlx.cli.stop import StopCriteria
from rlx.cli.tuned_examples import resolve_experiment_path
from rlx.loggers.creation import create_result_logger, results_root, trial_dir_name
from rlx.loggers.tracking import with_tracking
from rlx.utils.checkpoints import read_metadata
from rlx.utils.errors import ConfigError, install_hint

# ------------------------------------------------------------------ config assembly


def build_config(spec: ExperimentSpec, settings: RunSettings, validate: bool = True) -> Any:
    """The AlgorithmConfig of `spec` with the command line's overrides applied (validated
    unless `validate=False`: a config holding grid_search values is a sweep, checked per trial)."""
    algo = settings.algo or spec.algo
    if settings.restore:
        config, algo = _config_from_checkpoint(settings.restore, algo)
    elif isinstance(spec.config, AlgorithmConfig):
        config = spec.config.copy(copy_frozen=False)
        if algo is not None and config.algo_class is not None and \
                str(algo).upper() != getattr(config.algo_class, "__name__", str(config.algo_class)).upper():
            raise ConfigError(f"--algo {algo} does not match the file's config, which is a "
                              f"{type(spec.config).__name__}.")
    else:
        if not algo:
            raise ConfigError("No algorithm given: use --algo ALGO (or --run ALGO), e.g. --algo PPO; "
                              "'rlx list' shows them all.")
        config = get_algorithm_config(str(algo))
    if not isinstance(spec.config, AlgorithmConfig) and spec.config:
        config.update_from_dict(dict(spec.config))
    if settings.config:
        config.update_from_dict(dict(settings.config))
    env = settings.env if settings.env is not None else spec.env
    if env is not None:
        config.environment(env)
    if config.env is None:
        raise ConfigError("No environment given: use --env ENV, e.g. --env CartPole-v1.")
    _resolve_gymnasium_id(config)
    if settings.seed is not None:
        config.debugging(seed=settings.seed)
    if settings.verbose:
        config.debugging(log_level="DEBUG" if settings.verbose >= 2 else "INFO")
    if settings.wandb_project or settings.mlflow_uri:
        config.debugging(logger_config=with_tracking(config.logger_config, settings.wandb_project, settings.mlflow_uri))
    if validate:
        config.validate()
    return config


def _resolve_gymnasium_id(config: Any) -> None:
    """A Gymnasium plugin's 'module:NS/Name-vN' becomes 'NS/Name-vN' with the module imported
    and recorded for the checkpoints (see rlx.cli.env_source.resolve_gymnasium_id)."""
    env, module = resolve_gymnasium_id(config.env)
    if module is not None:
        config.environment(env)
        record_env_source(imports=[module])


def _config_from_checkpoint(path: str, algo: str | None) -> tuple[Any, str]:
    root = Path(path).expanduser()
    meta = read_metadata(root)
    source = rebuild_env_source(meta, root)
    # The restored run's checkpoints need the same to rebuild the env.
    record_env_source(imports=[entry["module"] for entry in source["imports"]],
                      experiment_file=source["experiment_file"])
    algo_cls = checkpoint_algorithm_class(root, meta)
    if algo is not None and str(algo).upper() != algo_cls.__name__.upper():
        raise ConfigError(f"--algo {algo} does not match the checkpoint {root}, which holds a {algo_cls.__name__}.")
    return read_config(root, algo_cls, {}), algo_cls.__name__


# ------------------------------------------------------------------ one run


#: The signals that stop training gracefully, and how notes and summaries name them. SIGTERM
#: (docker stop, cluster schedulers) is treated as Ctrl-C: finish the iteration, save a checkpoint.
_STOP_SIGNALS: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class _StopRequest:
    """First Ctrl-C or SIGTERM: finish the current iteration, checkpoint and stop. Second: abort
    (KeyboardInterrupt, as a second Ctrl-C)."""

    def __init__(self, reporter: ProgressReporter):
        self.requested = False
        #: "Ctrl-C" or "SIGTERM": what requested the stop ("" until then).
        self.reason = ""
        self._reporter = reporter
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_StopRequest":
        for signum in _STOP_SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: the signals keep their default behaviour
                break
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.reason = _STOP_SIGNALS.get(signum, "Ctrl-C")
        again = "press Ctrl-C" if signum == signal.SIGINT else "send SIGTERM"
        self._reporter.note(f"{self.reason}: stopping after this iteration and saving a checkpoint "
                            f"({again} again to abort without one).")

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


class _TermAsInterrupt:
    """Outside the training loop, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the
    Algorithm is still stopped cleanly (its worker processes ended) when it arrives while
    building or saving."""

    def __enter__(self) -> "_TermAsInterrupt":
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread
            self._previous = None
        return self

    @staticmethod
    def _handle(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def run_experiment(spec: ExperimentSpec, settings: RunSettings, out: TextIO | None = None) -> TrialOutcome:
    """Train `spec` until a stop criterion (or Ctrl-C / SIGTERM), checkpointing as asked; print
    progress and a summary to `out` (stdout) and return the outcome."""
    with _TermAsInterrupt():
        return _run_experiment(spec, settings, out)


def _run_experiment(spec: ExperimentSpec, settings: RunSettings, out: TextIO | None = None) -> TrialOutcome:
    out = out if out is not None else sys.stdout
    name = experiment_name(spec, settings)  # checked before anything is built
    config = build_config(spec, settings, validate=False)
    if config.search_space_keys():
        return run_sweep(spec, settings, config, out)
    config.validate()
    algo_name = getattr(config.algo_class, "__name__", str(config.algo_class))
    stop = StopCriteria(settings.stop if settings.stop is not None else spec.stop)
    stop.check_before_training(config)
    storage = Path(settings.storage_path or spec.storage_path or results_root()).expanduser()
    trial_dir = storage / name / trial_dir_name(algo_name, config.env)
    checkpoint_freq = first(settings.checkpoint_freq, spec.checkpoint_freq, 0)
    checkpoint_at_end = first(settings.checkpoint_at_end, spec.checkpoint_at_end, True)
    keeper = CheckpointKeeper(
        first(settings.keep_checkpoints_num, spec.keep_checkpoints_num, None),
        first(settings.checkpoint_score_attribute, spec.checkpoint_score_attribute, None),
        first(settings.checkpoint_score_order, spec.checkpoint_score_order, "max"))

    algo = config.build_algo(
        logger_creator=lambda cfg: create_result_logger(cfg, algo_name, logdir=trial_dir), use_copy=False,
    )
    outcome = TrialOutcome(algo=algo_name, env=config.env, trial_dir=Path(algo.logdir))
    reporter = ProgressReporter(out, live=settings.live_progress, goal=progress_goal(stop.criteria))
    try:
        if settings.restore:
            algo.restore(settings.restore)
            reporter.note(f"Restored {settings.restore} (iteration {algo.iteration}).")
        reporter.note(f"Training {algo_name} on {env_label(config.env)}; results in {outcome.trial_dir}")
        reporter.note(f"Stops at: {stop.describe()}")
        last = _train_loop(algo, stop, reporter, outcome, checkpoint_freq, keeper)
        if outcome.checkpoint is None or not outcome.checkpoint.endswith(f"{algo.iteration:06d}"):
            if checkpoint_at_end or outcome.stop_reason in _STOP_SIGNALS.values():
                _save(algo, outcome, keeper, reporter, announce=False, result=last)
    finally:
        reporter.finish()
        algo.stop()
    print_summary(outcome, out)
    return outcome


def experiment_name(spec: ExperimentSpec, settings: RunSettings) -> str:
    """The name of the experiment's directory under the storage path, checked to be one
    plain directory name (rlx.cli.names) so that results stay inside the storage path."""
    if settings.experiment_name:
        return check_dir_name(settings.experiment_name, "--experiment-name")
    return check_dir_name(spec.name or DEFAULT_EXPERIMENT_NAME, "experiment name")


def run_sweep(spec: ExperimentSpec, settings: RunSettings, config: Any, out: TextIO) -> TrialOutcome:
    """A config with grid_search values (or other Tune search spaces): one trial per value,
    run by Ray Tune (rlx.cli.sweep); returns the best trial's outcome."""
    try:
        import ray.tune  # noqa: F401
    except ImportError as err:
        raise ConfigError("a grid_search in the config runs a sweep with Ray Tune, which is not installed: "
                          + install_hint("tune")) from err
    from rlx.cli.sweep import run_sweep as run_tune_sweep  # imports Ray: only for a sweep

    return run_tune_sweep(spec, settings, config, out)


def _train_loop(algo: Any, stop: StopCriteria, reporter: ProgressReporter, outcome: TrialOutcome,
                checkpoint_freq: int, keeper: CheckpointKeeper) -> dict[str, Any] | None:
    """Train until a stop criterion or a stop request; returns the last result."""
    with _StopRequest(reporter) as ctrl_c:
        while True:
            result = algo.train()
            reporter.update(result)
            record(result, outcome)
            if checkpoint_freq and algo.iteration % checkpoint_freq == 0:
                _save(algo, outcome, keeper, reporter, announce=True, result=result)
            reached = stop.met(result)
            for note in stop.notes:
                reporter.note(note)
            stop.notes.clear()
            if reached:
                outcome.stop_reason = "reached " + " and ".join(reached)
                return result
            if ctrl_c.requested:
                outcome.stop_reason = ctrl_c.reason
                return result


def _save(algo: Any, outcome: TrialOutcome, keeper: CheckpointKeeper, reporter: ProgressReporter, announce: bool,
          result: dict[str, Any] | None) -> None:
    """Save a checkpoint of `algo` after the iteration whose result is `result`; keep what the
    checkpoint policy keeps (rlx.cli.checkpoint_keeper) and note the best one in `outcome`."""
    path = str(algo.save())
    outcome.checkpoint = path
    if announce:
        reporter.note(f"Checkpoint saved: {path}")
    keeper.add(path, algo.iteration, result)
    outcome.checkpoints = keeper.paths
    note = keeper.missing_score_note()
    if note:
        reporter.note(note)
    if keeper.score_attribute is not None and keeper.best is not None:
        outcome.best_checkpoint, outcome.best_checkpoint_score = keeper.best
        outcome.checkpoint_score_attribute = keeper.score_attribute


# ------------------------------------------------------------------ commands


def _settings(args: argparse.Namespace) -> RunSettings:
    framework = "torch" if getattr(args, "torch", False) else getattr(args, "framework", None)
    config = dict(getattr(args, "config", None) or {})
    if framework is not None:
        config["framework"] = framework
    if args.experiment_name:
        check_dir_name(args.experiment_name, "--experiment-name")
    return RunSettings(
        storage_path=args.storage_path, experiment_name=args.experiment_name, checkpoint_freq=args.checkpoint_freq,
        checkpoint_at_end=args.checkpoint_at_end, keep_checkpoints_num=args.keep_checkpoints_num, stop=args.stop,
        checkpoint_score_attribute=getattr(args, "checkpoint_score_attribute", None),
        checkpoint_score_order=getattr(args, "checkpoint_score_order", None),
        env=args.env, algo=getattr(args, "algo", None), config=config or None, seed=args.seed,
        verbose=args.verbose, restore=args.restore, live_progress=False if args.no_progress else None,
        wandb_project=getattr(args, "wandb_project", None), mlflow_uri=getattr(args, "mlflow_uri", None),
    )


def _import_requested_modules(args: argparse.Namespace) -> None:
    """Import the --import modules and have the checkpoints record them."""
    imports = list(getattr(args, "imports", None) or [])
    import_modules(imports)
    record_env_source(imports=imports)


def run_train_command(args: argparse.Namespace) -> int:
    """`rlx train --algo ALGO --env ENV ...`."""
    _import_requested_modules(args)
    settings = _settings(args)
    if settings.algo is None and settings.restore is None:
        raise ConfigError("rlx train needs --algo ALGO (or --run ALGO), e.g. rlx train --algo PPO --env CartPole-v1; "
                          "'rlx list' shows the algorithms.")
    run_experiment(ExperimentSpec(name=DEFAULT_EXPERIMENT_NAME), settings)
    return 0


def run_train_file_command(args: argparse.Namespace) -> int:
    """`rlx train file PATH` (and `rlx train -f PATH`): every experiment of the file in turn."""
    _import_requested_modules(args)
    args.path = resolve_experiment_path(args.path)  # a tuned example's name works from any directory
    specs = load_experiment_file(args.path)
    if not is_url(args.path) and Path(args.path).suffix.lower() == ".py":
        record_env_source(experiment_file=args.path)
    settings = _settings(args)
    for spec in specs:  # a mistake in a later experiment fails before the first one trains
        experiment_name(spec, settings)
        config = build_config(spec, settings, validate=False)
        StopCriteria(settings.stop if settings.stop is not None else spec.stop).check_before_training(config)
    outcomes = []
    for spec in specs:
        outcomes.append(run_experiment(spec, settings))
    if len(outcomes) > 1:
        print(f"\nRan {len(outcomes)} experiments from {args.path}:")
        for spec, outcome in zip(specs, outcomes):
            ret = "n/a" if outcome.final_return is None else f"{outcome.final_return:.1f}"
            print(f"  {spec.name}: {outcome.algo} on {env_label(outcome.env)}, return {ret}, "
                  f"checkpoint {outcome.checkpoint or '-'}")
    return 0
