"""Running an example script's experiment: a plain `algo.train()` loop (--no-tune) or Ray Tune,
with progress lines, checkpoints and WandB logging."""
from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
import time
from typing import Any

from rlx.cli.stop import StopCriteria, canonical_key
from rlx.examples.success_metric import RETURN_KEY, best_in_result_grid, is_number, reaches, report_success
from rlx.loggers.creation import results_root
from rlx.utils.errors import ConfigError, install_hint
from rlx.utils.metrics import (ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN, EVALUATION_RESULTS,
                               MODULE_EPISODE_RETURNS_MEAN, NUM_ENV_STEPS_SAMPLED_LIFETIME)

logger = logging.getLogger("rlx.examples.utils")

TRAINING_ITERATION = "training_iteration"
#: The environment variable WandB (and RLlib) read the API key from.
WANDB_ENV_VAR = "WANDB_API_KEY"


def run_without_tune(config: Any, args: argparse.Namespace, stop: dict[str, Any],
                     success_metric: dict[str, float] | None, keep_ray_up: bool) -> dict[str, Any]:
    """Train in a plain `algo.train()` loop until a stop criterion is met (--no-tune); the last result."""
    if args.wandb_key is not None:
        raise ConfigError("--wandb-key: rlx logs to WandB through Ray Tune's WandbLoggerCallback, which --no-tune "
                          "does not use. Drop --no-tune, or drop --wandb-key.")
    if not isinstance(stop, dict):
        raise ConfigError(f"With --no-tune, stop must be a dict {{result key: minimum}}, got {stop!r}; Tune's "
                          "Stoppers only work in Tune runs (drop --no-tune).")
    criteria = StopCriteria(stop)
    criteria.check_before_training(config)
    start = time.time()
    results: dict[str, Any] = {}
    best = math.nan
    algo = config.build()
    try:
        iterations = int(stop.get(TRAINING_ITERATION, args.stop_iters))
        for i in range(iterations):
            results = algo.train()
            print_iteration(i, results)
            if success_metric:
                key = next(iter(success_metric))
                value = criteria.value(results, key)
                if is_number(value):
                    best = float(value) if math.isnan(best) else max(best, float(value))
            if args.checkpoint_freq and (i + 1) % args.checkpoint_freq == 0:
                print(f"Checkpoint saved in {checkpoint_path(algo.save())}")
            reached = criteria.met(results)
            for note in criteria.notes:
                logger.warning(note)
            criteria.notes.clear()
            if reached:
                key = next(k for k, bound in criteria.criteria.items() if reaches(criteria.value(results, k), bound))
                print(f"Stop criterion ({key}={stop[key]}) fulfilled!")
                break
        if args.checkpoint_at_end:
            print(f"Checkpoint saved in {checkpoint_path(algo.save())}")
    finally:
        algo.stop()
        if not keep_ray_up:
            shutdown_ray()

    if args.as_test and success_metric:
        report_success(success_metric, best, args, time.time() - start, results, "TERMINATED")
    return results


def run_with_tune(config: Any, args: argparse.Namespace, stop: dict[str, Any],
                  success_metric: dict[str, float] | None, trainable: Any, tune_callbacks: list | None,
                  keep_ray_up: bool, scheduler: Any, progress_reporter: Any) -> Any:
    """Train through Ray Tune until a stop criterion is met; Tune's ResultGrid."""
    try:
        import ray
        from ray import tune
    except ImportError as err:
        raise ImportError("run_rllib_example_script_experiment runs the experiment through Ray Tune, which is not "
                          f"installed: {install_hint('tune')} Or pass --no-tune to train in a plain loop.") from err
    import rlx.tune  # noqa: F401 - registers rlx's algorithms, envs and configs with Tune (before ray.init)

    if not ray.is_initialized():
        ray.init(num_cpus=args.num_cpus or None, ignore_reinit_error=True)

    callbacks = list(tune_callbacks or [])
    wandb = wandb_callback(args, config)
    if wandb is not None:
        callbacks.append(wandb)

    if progress_reporter is None:
        columns = {
            TRAINING_ITERATION: "iter",
            "time_total_s": "total time (s)",
            NUM_ENV_STEPS_SAMPLED_LIFETIME: "ts",
            RETURN_KEY: "episode return mean" if args.num_agents == 0 else "combined return",
        }
        if args.num_agents > 0:
            for pid in config.policies or {}:
                columns[f"{ENV_RUNNER_RESULTS}/{MODULE_EPISODE_RETURNS_MEAN}/{pid}"] = f"return {pid}"
        progress_reporter = tune.CLIReporter(metric_columns=columns, max_report_frequency=args.tune_max_report_freq)
    # Tune's newer console output ignores a custom CLIReporter (as in RLlib).
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"

    storage = results_root().resolve()
    start = time.time()
    try:
        results = tune.Tuner(
            trainable or config.algo_class,
            param_space=config,
            run_config=tune.RunConfig(
                storage_path=str(storage),
                failure_config=tune.FailureConfig(max_failures=0, fail_fast="raise"),
                # rlx's names for RLlib's older keys (episode_reward_mean, timesteps_total, ...).
                stop={canonical_key(k): v for k, v in stop.items()} if isinstance(stop, dict) else stop,
                verbose=args.verbose,
                callbacks=callbacks,
                checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=args.checkpoint_freq,
                                                        checkpoint_at_end=args.checkpoint_at_end),
                progress_reporter=progress_reporter,
            ),
            tune_config=tune.TuneConfig(num_samples=args.num_samples,
                                        max_concurrent_trials=args.max_concurrent_trials, scheduler=scheduler),
        ).fit()
    finally:
        if not keep_ray_up:
            ray.shutdown()
    taken = time.time() - start

    if args.as_test and success_metric:
        key = next(iter(success_metric))
        best = best_in_result_grid(results, key)
        first = results[0] if len(results) else None
        stats = dict(first.metrics or {}) if first is not None else {}
        status = "ERROR" if first is None or first.error is not None else "TERMINATED"
        report_success(success_metric, best, args, taken, stats, status)
    return results


def wandb_callback(args: argparse.Namespace, config: Any) -> Any:
    """Tune's WandbLoggerCallback for --wandb-key (or $WANDB_API_KEY), or None."""
    key = args.wandb_key or os.environ.get(WANDB_ENV_VAR)
    if not key:
        return None
    try:
        import wandb  # noqa: F401
    except ImportError:
        if args.wandb_key is None:  # only the environment variable: nothing was asked on the command line
            logger.warning("%s is set, but the wandb package is not installed: not logging to WandB.",
                           WANDB_ENV_VAR)
            return None
        raise ConfigError("--wandb-key: logging to WandB needs the wandb package (pip install wandb).") from None
    from ray.air.integrations.wandb import WandbLoggerCallback

    project = args.wandb_project or (args.algo.lower() + "-" + re.sub("\\W+", "-", str(config.env).lower()))
    return WandbLoggerCallback(api_key=key, project=project, upload_checkpoints=True,
                               **({"name": args.wandb_run_name} if args.wandb_run_name else {}))


def print_iteration(i: int, results: dict[str, Any]) -> None:
    """Print one line per iteration: its number and the (evaluation) return."""
    line = f"iter={i}"
    runners = results.get(ENV_RUNNER_RESULTS)
    if isinstance(runners, dict):
        line += f" R={runners.get(EPISODE_RETURN_MEAN, math.nan)}"
    evaluation = results.get(EVALUATION_RESULTS)
    if isinstance(evaluation, dict) and isinstance(evaluation.get(ENV_RUNNER_RESULTS), dict):
        line += f" R(eval)={evaluation[ENV_RUNNER_RESULTS].get(EPISODE_RETURN_MEAN, math.nan)}"
    print(line)


def checkpoint_path(saved: Any) -> str:
    """Where `algo.save()` put its checkpoint."""
    checkpoint = getattr(saved, "checkpoint", saved)
    return str(getattr(checkpoint, "path", checkpoint))


def shutdown_ray() -> None:
    """Shut Ray down if it runs (never imports it)."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()
