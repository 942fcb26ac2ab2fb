"""The helpers of RLlib's example scripts (`ray.rllib.examples.utils`).

An example script builds its command line with `add_rllib_example_script_args()`, its
config from the parsed flags, and hands both to `run_rllib_example_script_experiment()`:

    parser = add_rllib_example_script_args(default_reward=450.0)
    args = parser.parse_args()
    config = PPOConfig().environment("CartPole-v1")
    run_rllib_example_script_experiment(config, args)

which applies the flags to the config (`--num-env-runners`, `--num-learners`, evaluation
settings, ...), then trains until one of `--stop-iters`, `--stop-timesteps` or
`--stop-reward` is reached: in a plain loop of `algo.train()` with `--no-tune` (no Ray
needed), else through Ray Tune (in an rlx checkout:
`pip install -c constraints.txt -e '.[tune]'`). `--as-test` raises when the reward was not
reached.

rlx differences: rlx is PyTorch-only (`--framework` other than torch is refused), and writes results
under $RLX_RESULTS_DIR or ~/rlx_results, also for Tune runs. Flags that rlx cannot honour
are accepted at their defaults and refused with an error naming the flag when set. With
`--no-tune`, Ray is not started (`--num-cpus` only sizes the Ray instance of Tune runs),
the loop also honours `--checkpoint-freq`/`--checkpoint-at-end` and `--as-test`, and the
Algorithm is stopped before the function returns.
"""
from __future__ import annotations

import argparse
import logging
from typing import Any, Callable

# Registers rlx's algorithms with Ray Tune as soon as a script imports ray.tune (e.g. for
# `get_trainable_cls("PPO")`); never imports Ray itself.
import rlx.algorithms  # noqa: F401
from rlx.cli.stop import canonical_key, lookup
from rlx.examples.script_runs import (TRAINING_ITERATION, WANDB_ENV_VAR, run_with_tune, run_without_tune,
                                      shutdown_ray)
from rlx.examples.success_metric import RETURN_KEY, reaches, success_metric_for
from rlx.utils.errors import ConfigError
from rlx.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

__all__ = ["TRAINING_ITERATION", "WANDB_ENV_VAR", "add_rllib_example_script_args", "apply_args_to_config",
           "run_rllib_example_script_experiment", "should_stop"]

logger = logging.getLogger(__name__)


def add_rllib_example_script_args(
    parser: argparse.ArgumentParser | None = None,
    default_reward: float = 100.0,
    default_iters: int = 200,
    default_timesteps: int = 100000,
) -> argparse.ArgumentParser:
    """Add the command line flags of RLlib's example scripts to `parser` (a new one if None)
    and return it. `default_reward`, `default_iters` and `default_timesteps` are the defaults
    of `--stop-reward`, `--stop-iters` and `--stop-timesteps`."""
    if parser is None:
        parser = argparse.ArgumentParser()
    add = parser.add_argument

    # Algorithm and config.
    add("--algo", type=str, default="PPO", help="The registered algorithm to use (rlx: PPO, DQN, SAC, DDPG, TD3).")
    add("--framework", choices=["tf", "tf2", "torch"], default="torch",
        help="The deep-learning framework; rlx is PyTorch-only, so only 'torch' runs.")
    add("--env", type=str, default=None,
        help="The env to run (a Gymnasium id or registered name); used when the config names none.")
    add("--num-env-runners", type=int, default=None, help="The number of remote EnvRunners.")
    add("--num-envs-per-env-runner", type=int, default=None,
        help="The number of vectorized sub-envs per EnvRunner.")
    add("--num-agents", type=int, default=0,
        help="0 (default): single-agent. n > 0: multi-agent, for scripts that clone their env n times; the "
             "return reported is the sum over all agents' returns.")

    # Evaluation.
    add("--evaluation-num-env-runners", type=int, default=0, help="The number of evaluation EnvRunners.")
    add("--evaluation-interval", type=int, default=0,
        help="Evaluate every this many iterations; 0 (default) disables evaluation.")
    add("--evaluation-duration", type=lambda v: v if v == "auto" else int(v), default=10,
        help="Units (see --evaluation-duration-unit) per evaluation round, or 'auto' (with "
             "--evaluation-parallel-to-training) to evaluate as long as the training step takes.")
    add("--evaluation-duration-unit", type=str, default="episodes", choices=["episodes", "timesteps"],
        help="What --evaluation-duration counts.")
    add("--evaluation-parallel-to-training", action="store_true",
        help="Evaluate at the same time as training (results then lag one iteration behind).")

    # Logging.
    add("--output", type=str, default=None,
        help="Directory to write the sampled trajectories to (offline data output).")
    add("--log-level", type=str, default=None, choices=["INFO", "DEBUG", "WARN", "ERROR"],
        help="The log level of the algorithm.")

    # tune.Tuner.
    add("--no-tune", action="store_true",
        help="Train in a plain loop of algo.train() instead of through tune.Tuner().")
    add("--num-samples", type=int, default=1, help="How many Tune trials to run (Tune only).")
    add("--max-concurrent-trials", type=int, default=None, help="How many Tune trials to run at once (Tune only).")
    add("--verbose", type=int, default=2, help="The verbosity of tune.Tuner() (Tune only).")
    add("--checkpoint-freq", type=int, default=0,
        help="Save a checkpoint every this many iterations (0: never).")
    add("--checkpoint-at-end", action="store_true", help="Save a checkpoint at the end of the experiment.")
    add("--tune-max-report-freq", type=int, default=5,
        help="Seconds between Tune's progress reports (Tune only).")

    # WandB.
    add("--wandb-key", type=str, default=None,
        help="WandB API key: log the results to WandB (Tune runs, needs the wandb package).")
    add("--wandb-project", type=str, default=None, help="The WandB project name.")
    add("--wandb-run-name", type=str, default=None, help="The WandB run name.")

    # Stopping and testing.
    add("--stop-reward", type=float, default=default_reward, help="Stop once the mean episode return reaches this.")
    add("--stop-iters", type=int, default=default_iters, help="Stop after this many training iterations.")
    add("--stop-timesteps", type=int, default=default_timesteps,
        help="Stop after this many sampled env steps.")
    add("--as-test", action="store_true",
        help="Run as a test: raise an error at the end unless --stop-reward was reached within --stop-iters and "
             "--stop-timesteps.")
    add("--as-release-test", action="store_true",
        help="As --as-test, and write a JSON summary to the file $TEST_OUTPUT_JSON names.")

    # Learners.
    add("--num-learners", type=int, default=None,
        help="The number of Learners (None: the algorithm's default).")
    add("--num-cpus-per-learner", type=float, default=None,
        help="CPUs per Learner (None: the algorithm's default).")
    add("--num-gpus-per-learner", type=float, default=None,
        help="GPUs per Learner; unset: one per Learner when the machine has enough, else 0 (as RLlib).")
    add("--num-aggregator-actors-per-learner", type=int, default=None,
        help="Aggregator actors per Learner (RLlib's IMPALA/APPO).")

    # Ray.
    add("--num-cpus", type=int, default=0, help="CPUs of the local Ray instance Tune runs on (0: all).")
    add("--num-gpus", type=int, default=None, help="GPUs of the old API stack (with --old-api-stack; refused otherwise, as in RLlib).")
    add("--old-api-stack", action="store_true",
        help="RLlib's old API stack; rlx runs old-API code on its one stack (said once in the log).")

    # Deprecated flags, kept so that old scripts parse.
    add("--enable-new-api-stack", action="store_true", help=argparse.SUPPRESS)
    add("--local-mode", action="store_true", help=argparse.SUPPRESS)
    return parser


def should_stop(stop: dict[str, Any], results: dict[str, Any], keep_ray_up: bool = False) -> bool:
    """Whether `results` (one train() result) reaches any criterion of `stop`
    ({key: minimum}, nested keys written 'a/b'; RLlib's older key names work too). Missing or
    non-numeric values never stop. When a criterion is met, prints which and, unless
    `keep_ray_up`, shuts Ray down (if it runs)."""
    for key, threshold in stop.items():
        value = _lookup(results, key)
        if value is None:
            value = lookup(results, canonical_key(key))
        if reaches(value, threshold):
            print(f"Stop criterion ({key}={threshold}) fulfilled!")
            if not keep_ray_up:
                shutdown_ray()
            return True
    return False


def run_rllib_example_script_experiment(
    base_config: Any,
    args: argparse.Namespace | None = None,
    *,
    stop: dict[str, Any] | None = None,
    success_metric: dict[str, float] | None = None,
    trainable: Any = None,
    tune_callbacks: list | None = None,
    keep_config: bool = False,
    keep_ray_up: bool = False,
    scheduler: Any = None,
    progress_reporter: Any = None,
) -> Any:
    """Train `base_config`, changed by the flags in `args` (see
    `add_rllib_example_script_args`; parsed from the command line when None), until a stop
    criterion is met.

    Args:
        base_config: The AlgorithmConfig. Unless `keep_config`, the flags set its
            num_env_runners, num_envs_per_env_runner, learners, evaluation, log level, env
            (when it names none), ...
        args: The parsed flags. Missing attributes take the parser's defaults.
        stop: {result key: minimum} (nested keys 'a/b'); default: `--stop-reward` on
            `env_runners/episode_return_mean`, `--stop-timesteps` on
            `env_runners/num_env_steps_sampled_lifetime`, `--stop-iters` on
            `training_iteration`.
        success_metric: With `--as-test`: {one result key: minimum} the run must reach
            (default: the return criterion of `stop`, evaluation's if present, else
            `--stop-reward` on `env_runners/episode_return_mean`).
        trainable: What Tune runs (default: the config's algorithm class).
        tune_callbacks: Tune callbacks (a WandB logger is added for `--wandb-key`).
        keep_config: Leave `base_config` as it is.
        keep_ray_up: Do not shut Ray down at the end.
        scheduler: A Tune trial scheduler.
        progress_reporter: A Tune progress reporter (default: a CLIReporter of the
            iteration, time, steps and returns, per module for `--num-agents` > 0).

    Returns:
        With `--no-tune` the last train() result dict, else Tune's ResultGrid.

    Raises:
        ValueError: With `--as-test`, when the success metric was not reached.
        ConfigError: For a flag rlx cannot honour, naming the flag.
    """
    if args is None:
        args = add_rllib_example_script_args().parse_args()
    args = _with_defaults(args)

    if args.enable_new_api_stack:
        logger.warning("--enable-new-api-stack has no effect: RLlib's new API stack is the default, and rlx's only "
                       "stack. Drop the flag.")
    if args.local_mode:
        raise ValueError("`--local-mode` is no longer supported (neither by RLlib nor by rlx); drop the flag. "
                         "Use --no-tune --num-env-runners=0 to debug everything in one process.")
    if args.as_release_test:
        args.as_test = True
    if args.as_test:
        args.verbose = 1
        args.tune_max_report_freq = 30

    if stop is None:
        stop = {
            RETURN_KEY: args.stop_reward,
            f"{ENV_RUNNER_RESULTS}/{NUM_ENV_STEPS_SAMPLED_LIFETIME}": args.stop_timesteps,
            TRAINING_ITERATION: args.stop_iters,
        }
    if args.as_test:
        success_metric = success_metric_for(success_metric, stop, args)

    config = base_config
    if not keep_config:
        apply_args_to_config(config, args)

    if args.no_tune:
        return run_without_tune(config, args, stop, success_metric, keep_ray_up)
    return run_with_tune(config, args, stop, success_metric, trainable, tune_callbacks, keep_ray_up, scheduler,
                         progress_reporter)


def apply_args_to_config(config: Any, args: argparse.Namespace) -> Any:
    """Apply the flags of `add_rllib_example_script_args` to `config` (in place, as
    `run_rllib_example_script_experiment` does unless `keep_config`); returns it. A flag
    rlx cannot honour raises a ConfigError naming it."""
    args = _with_defaults(args)
    _apply("--framework", args.framework, config.framework, args.framework)
    if args.env is not None and config.env is None:
        _apply("--env", args.env, config.environment, args.env)
    if args.old_api_stack:
        config.api_stack(enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False)

    if args.num_env_runners is not None:
        _apply("--num-env-runners", args.num_env_runners, config.env_runners, num_env_runners=args.num_env_runners)
    if args.num_envs_per_env_runner is not None:
        _apply("--num-envs-per-env-runner", args.num_envs_per_env_runner, config.env_runners,
               num_envs_per_env_runner=args.num_envs_per_env_runner)

    _apply_gpu_flags(config, args)
    if args.num_cpus_per_learner is not None:
        _apply("--num-cpus-per-learner", args.num_cpus_per_learner, config.learners,
               num_cpus_per_learner=args.num_cpus_per_learner)

    if args.evaluation_interval > 0:
        _apply("--evaluation-interval", args.evaluation_interval, config.evaluation,
               evaluation_num_env_runners=args.evaluation_num_env_runners,
               evaluation_interval=args.evaluation_interval,
               evaluation_duration=args.evaluation_duration,
               evaluation_duration_unit=args.evaluation_duration_unit,
               evaluation_parallel_to_training=args.evaluation_parallel_to_training)
    if args.log_level is not None:
        _apply("--log-level", args.log_level, config.debugging, log_level=args.log_level)
    if args.output is not None:
        _apply("--output", args.output, config.offline_data, output=args.output)
    return config


def _apply_gpu_flags(config: Any, args: argparse.Namespace) -> None:
    """--num-gpus, --num-learners, --num-gpus-per-learner and --num-aggregator-actors-per-learner, as
    RLlib applies them: on the new stack --num-gpus is refused and a GPU per Learner is used when the
    machine has enough (unless --num-gpus-per-learner says otherwise); on the old stack --num-gpus sets
    num_gpus."""
    if not config.enable_rl_module_and_learner:
        if args.num_gpus is not None:
            _apply("--num-gpus", args.num_gpus, config.resources, num_gpus=args.num_gpus)
        return
    if args.num_gpus is not None and args.num_gpus > 0:
        raise ConfigError(f"--num-gpus={args.num_gpus} is not supported on the new API stack: to train on GPUs, use "
                          "--num-gpus-per-learner=1 and --num-learners=[the number of GPUs] instead.")
    learners = (args.num_learners if args.num_learners is not None else config.num_learners) or 1
    available = _num_cuda_devices()
    _apply("--num-gpus", 0, config.resources, num_gpus=0)
    if args.num_learners is not None:
        _apply("--num-learners", args.num_learners, config.learners, num_learners=args.num_learners)
    if args.num_aggregator_actors_per_learner is not None:
        _apply("--num-aggregator-actors-per-learner", args.num_aggregator_actors_per_learner, config.learners,
               num_aggregator_actors_per_learner=args.num_aggregator_actors_per_learner)
    if args.num_gpus_per_learner is None:
        per_learner = 1 if available >= learners else 0
    elif available < args.num_gpus_per_learner * learners:
        raise ConfigError(f"--num-gpus-per-learner={args.num_gpus_per_learner:g} with {learners} Learner(s) needs "
                          f"{args.num_gpus_per_learner * learners:g} GPUs, but this machine has {available}.")
    else:
        per_learner = args.num_gpus_per_learner
    _apply("--num-gpus-per-learner", per_learner, config.learners, num_gpus_per_learner=per_learner)


def _num_cuda_devices() -> int:
    """CUDA devices torch sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _dest(flag: str) -> str:
    """The argparse attribute of a flag: '--num-env-runners' -> 'num_env_runners'."""
    return flag.lstrip("-").replace("-", "_")


# ---------------------------------------------------------------------- helpers


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with every flag it lacks (a script's own parser) at its default."""
    defaults = vars(add_rllib_example_script_args().parse_args([]))
    missing = {k: v for k, v in defaults.items() if not hasattr(args, k)}
    for key, value in missing.items():
        setattr(args, key, value)
    return args


def _apply(flag: str, value: Any, method: Callable[..., Any], *posargs: Any, **kwargs: Any) -> None:
    """Call a config section method; a ConfigError it raises names the flag."""
    try:
        method(*posargs, **kwargs)
    except ConfigError as err:
        raise ConfigError(f"{flag}={value}: {err}") from err


def _lookup(results: dict[str, Any], key: str) -> Any:
    node: Any = results
    for part in key.split("/"):
        part = part.strip()
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


