"""`rlx train` and `rlx train file`: run experiments with stop criteria, checkpoints,
live progress and a closing summary."""
from __future__ import annotations

import argparse
import math
import shlex
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rlx.cli.experiments import ExperimentSpec, is_url, load_experiment_file
from rlx.cli.names import check_dir_name
from rlx.cli.progress import ProgressReporter, format_seconds
from rlx.cli.stop import StopCriteria, lookup
from rlx.utils.errors import ConfigError

DEFAULT_EXPERIMENT_NAME = "default"
RETURN_KEY = "env_runners/episode_return_mean"


@dataclass
class RunSettings:
    """How to run experiments: command-line choices that override each experiment's own."""

    storage_path: str | None = None
    experiment_name: str | None = None
    checkpoint_freq: int | None = None
    checkpoint_at_end: bool | None = None
    keep_checkpoints_num: int | None = None
    stop: dict[str, Any] | None = None
    env: Any = None
    algo: str | None = None
    config: dict[str, Any] | None = None
    seed: int | None = None
    verbose: int = 0
    restore: str | None = None
    live_progress: bool | None = None


@dataclass
class TrialOutcome:
    """What a finished run reports: where it wrote, how far it got, why it stopped."""

    algo: str
    env: Any
    trial_dir: Path
    iterations: int = 0
    env_steps: int = 0
    time_s: float = 0.0
    final_return: float | None = None
    best_return: float | None = None
    best_iteration: int | None = None
    stop_reason: str = ""
    checkpoint: str | None = None
    checkpoints: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ config assembly


def build_config(spec: ExperimentSpec, settings: RunSettings, validate: bool = True) -> Any:
    """The AlgorithmConfig of `spec` with the command line's overrides applied (validated
    unless `validate=False`: a config holding grid_search values is a sweep, checked per trial)."""
    from rlx.algorithms.algorithm_config import AlgorithmConfig
    from rlx.algorithms.registry import get_algorithm_config

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
    if validate:
        config.validate()
    return config


def _resolve_gymnasium_id(config: Any) -> None:
    """A Gymnasium plugin's 'module:NS/Name-vN' becomes 'NS/Name-vN' with the module imported
    and recorded for the checkpoints (see rlx.cli.env_source.resolve_gymnasium_id)."""
    from rlx.algorithms.checkpointing import record_env_source
    from rlx.cli.env_source import resolve_gymnasium_id

    env, module = resolve_gymnasium_id(config.env)
    if module is not None:
        config.environment(env)
        record_env_source(imports=[module])


def _config_from_checkpoint(path: str, algo: str | None) -> tuple[Any, str]:
    from rlx.algorithms.checkpointing import checkpoint_algorithm_class, read_config, record_env_source
    from rlx.cli.env_source import rebuild_env_source
    from rlx.utils.checkpoints import read_metadata

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


def _env_label(env: Any) -> str:
    if isinstance(env, str):
        return env
    return getattr(env, "__name__", type(env).__name__)


# ------------------------------------------------------------------ one run


class _StopRequest:
    """First Ctrl-C: finish the current iteration, checkpoint and stop. Second: abort."""

    def __init__(self, reporter: ProgressReporter):
        self.requested = False
        self._reporter = reporter
        self._previous: Any = None

    def __enter__(self) -> "_StopRequest":
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: Ctrl-C keeps its default behaviour
            self._previous = None
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._reporter.note("Ctrl-C: stopping after this iteration and saving a checkpoint "
                            "(press Ctrl-C again to abort without one).")

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def run_experiment(spec: ExperimentSpec, settings: RunSettings, out: TextIO | None = None) -> TrialOutcome:
    """Train `spec` until a stop criterion (or Ctrl-C), checkpointing as asked; print
    progress and a summary to `out` (stdout) and return the outcome."""
    from rlx.loggers.creation import create_result_logger, results_root, trial_dir_name

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
    checkpoint_freq = _first(settings.checkpoint_freq, spec.checkpoint_freq, 0)
    checkpoint_at_end = _first(settings.checkpoint_at_end, spec.checkpoint_at_end, True)
    keep = _first(settings.keep_checkpoints_num, spec.keep_checkpoints_num, None)

    algo = config.build_algo(
        logger_creator=lambda cfg: create_result_logger(cfg, algo_name, logdir=trial_dir), use_copy=False,
    )
    outcome = TrialOutcome(algo=algo_name, env=config.env, trial_dir=Path(algo.logdir))
    reporter = ProgressReporter(out, live=settings.live_progress)
    try:
        if settings.restore:
            algo.restore(settings.restore)
            reporter.note(f"Restored {settings.restore} (iteration {algo.iteration}).")
        reporter.note(f"Training {algo_name} on {_env_label(config.env)}; results in {outcome.trial_dir}")
        reporter.note(f"Stops at: {stop.describe()}")
        _train_loop(algo, stop, reporter, outcome, checkpoint_freq, keep)
        if outcome.checkpoint is None or not outcome.checkpoint.endswith(f"{algo.iteration:06d}"):
            if checkpoint_at_end or outcome.stop_reason.startswith("Ctrl-C"):
                _save(algo, outcome, keep, reporter, announce=False)
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
    run by Ray Tune (rlx.tune.cli_sweep); returns the best trial's outcome."""
    try:
        import ray.tune  # noqa: F401
    except ImportError as err:
        from rlx.utils.errors import install_hint

        raise ConfigError("a grid_search in the config runs a sweep with Ray Tune, which is not installed: "
                          + install_hint("tune")) from err
    from rlx.tune.cli_sweep import run_sweep as run_tune_sweep

    return run_tune_sweep(spec, settings, config, out)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _train_loop(algo: Any, stop: StopCriteria, reporter: ProgressReporter, outcome: TrialOutcome,
                checkpoint_freq: int, keep: int | None) -> None:
    with _StopRequest(reporter) as ctrl_c:
        while True:
            result = algo.train()
            reporter.update(result)
            _record(result, outcome)
            if checkpoint_freq and algo.iteration % checkpoint_freq == 0:
                _save(algo, outcome, keep, reporter, announce=True)
            reached = stop.met(result)
            for note in stop.notes:
                reporter.note(note)
            stop.notes.clear()
            if reached:
                outcome.stop_reason = "reached " + " and ".join(reached)
                return
            if ctrl_c.requested:
                outcome.stop_reason = "Ctrl-C"
                return


def _record(result: dict[str, Any], outcome: TrialOutcome) -> None:
    outcome.iterations = int(result.get("training_iteration", 0))
    outcome.env_steps = int(result.get("num_env_steps_sampled_lifetime", 0) or 0)
    outcome.time_s = float(result.get("time_total_s", 0.0) or 0.0)
    ret = lookup(result, RETURN_KEY)
    if isinstance(ret, (int, float)) and not math.isnan(ret):
        outcome.final_return = float(ret)
        if outcome.best_return is None or ret > outcome.best_return:
            outcome.best_return = float(ret)
            outcome.best_iteration = outcome.iterations


def _save(algo: Any, outcome: TrialOutcome, keep: int | None, reporter: ProgressReporter, announce: bool) -> None:
    path = str(algo.save())
    outcome.checkpoint = path
    if path not in outcome.checkpoints:
        outcome.checkpoints.append(path)
    if announce:
        reporter.note(f"Checkpoint saved: {path}")
    if keep is not None:
        while len(outcome.checkpoints) > keep:
            shutil.rmtree(outcome.checkpoints.pop(0), ignore_errors=True)


# ------------------------------------------------------------------ summary


def evaluate_command(outcome: TrialOutcome) -> str:
    """The exact `rlx evaluate` command for the outcome's last checkpoint."""
    parts = ["rlx", "evaluate", shlex.quote(str(outcome.checkpoint)), "--algo", outcome.algo]
    if isinstance(outcome.env, str):
        parts += ["--env", shlex.quote(outcome.env)]
    return " ".join(parts)


def print_summary(outcome: TrialOutcome, out: TextIO) -> None:
    """Final and best return, where results and checkpoints are, and how to evaluate."""

    def fmt(value: float | None) -> str:
        return "n/a (no episode finished)" if value is None else f"{value:.1f}"

    reason = f" ({outcome.stop_reason})" if outcome.stop_reason else ""
    lines = [
        "",
        f"Finished {outcome.algo} on {_env_label(outcome.env)}: {outcome.iterations} iterations, "
        f"{outcome.env_steps:,} env steps, {format_seconds(outcome.time_s)}{reason}.",
        f"  Final return: {fmt(outcome.final_return)}"
        + (f"   best: {fmt(outcome.best_return)} (iteration {outcome.best_iteration})"
           if outcome.best_return is not None else ""),
        f"  Results:      {outcome.trial_dir}",
        f"  TensorBoard:  tensorboard --logdir {shlex.quote(str(outcome.trial_dir.parent))}",
    ]
    if outcome.checkpoint:
        lines += [f"  Checkpoint:   {outcome.checkpoint}", "Evaluate it with:", f"  {evaluate_command(outcome)}"]
    else:
        lines.append("  No checkpoint saved (use --checkpoint-at-end or --checkpoint-freq N).")
    out.write("\n".join(lines) + "\n")
    out.flush()


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
        env=args.env, algo=getattr(args, "algo", None), config=config or None, seed=args.seed,
        verbose=args.verbose, restore=args.restore, live_progress=False if args.no_progress else None,
    )


def _import_requested_modules(args: argparse.Namespace) -> None:
    """Import the --import modules and have the checkpoints record them."""
    from rlx.algorithms.checkpointing import record_env_source
    from rlx.cli.env_source import import_modules

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
    from rlx.algorithms.checkpointing import record_env_source

    _import_requested_modules(args)
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
            print(f"  {spec.name}: {outcome.algo} on {_env_label(outcome.env)}, return {ret}, "
                  f"checkpoint {outcome.checkpoint or '-'}")
    return 0
