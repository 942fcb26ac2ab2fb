"""Entry point of the `rlx` command: argument parsing and error reporting.

Every command's options are declared here so `--help` is complete without importing
torch; each command's work lives in its own module, imported only when it runs.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Callable, Sequence

from rlx.algorithms.registry import list_algorithms
from rlx.cli.env_source import add_cwd_to_sys_path
from rlx.utils.errors import RLXError
from rlx.utils.version import __version__

EPILOG_TRAIN = """\
examples:
  rlx train --algo PPO --env CartPole-v1 --stop '{"env_runners/episode_return_mean": 450}'
  rlx train --run DQN --env CartPole-v1 --config '{"lr": 0.0005}' --checkpoint-freq 10
  rlx train --algo PPO --env my_envs:MyEnv        # my_envs.py in the current directory
  rlx train --algo PPO --env ALE/Pong-v5          # an Atari game (ale-py); tuned: rlx train file pong-ppo
  rlx train --algo PPO --env ale_py:ALE/Pong-v5   # a Gymnasium plugin package's env
  rlx train file tuned_examples/ppo/cartpole-ppo.yaml

Stop keys are result keys, nested ones written a/b; training stops when any is reached.
RLlib's older names (episode_reward_mean, sampler_results/..., timesteps_total, ...) work
too. Without --stop, training runs until Ctrl-C, which stops after the current iteration
and saves a final checkpoint.
"""

EPILOG_FILE = """\
File formats:
  YAML or JSON: {NAME: {run (or algo): ALGO, env: ENV, stop: {...}, config: {...}}, ...}
    several experiments run one after another; each may also set checkpoint_freq,
    checkpoint_at_end, keep_checkpoints_num and storage_path (or local_dir), and
    checkpoint_config: {checkpoint_frequency, checkpoint_at_end, num_to_keep,
    checkpoint_score_attribute, checkpoint_score_order} as Tune's CheckpointConfig.
    PATH may be an http(s) URL of such a file (downloaded, at most 1 MiB).
  Python (.py): defines `config` (an AlgorithmConfig) and optionally `stop` (a dict)
    and `checkpoint_config` (a dict or a tune.CheckpointConfig).
Command-line flags override the file.
"""


ENV_HELP = ("environment: a Gymnasium id (Atari's as ALE/Pong-v5; another plugin's as 'module:NS/Name-v0'), a name "
            "given to rlx.register_env, or 'package.module:EnvClass'")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (plus where to find help)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        """Print `message` as one line and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class CLIError(Exception):
    """A user mistake on the command line; printed as one line, exit status 2."""


def json_arg(what: str) -> Callable[[str], dict]:
    """An argparse type parsing a JSON object, with an error naming the option."""

    def parse(text: str) -> dict:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise argparse.ArgumentTypeError(f"{what} is not valid JSON ({err.msg} at column {err.colno}): {text}")
        except RecursionError:  # argparse would let it escape as a traceback
            raise argparse.ArgumentTypeError(f"{what} is nested too deeply to be a JSON object of settings")
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"{what} must be a JSON object like '{{\"key\": value}}', got: {text}")
        return value

    return parse


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type parsing a whole number >= `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def positive_float(text: str) -> float:
    """An argparse type parsing a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def _add_imports(parser: argparse.ArgumentParser) -> None:
    """--import MODULE (repeatable), for train, train file and evaluate."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE before the env is resolved, e.g. one that calls register_env or "
                             "registers Gymnasium envs (repeatable; the current directory is searched)")


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="-v logs at INFO level, -vv at DEBUG level and shows tracebacks on errors")


def _add_run_options(parser: argparse.ArgumentParser, from_file: bool) -> None:
    """Options shared by `rlx train` and `rlx train file`."""
    if from_file:
        parser.add_argument("--env", help=ENV_HELP + " (overrides the file)")
    parser.add_argument("--stop", type=json_arg("--stop"), default=None, metavar="JSON",
                        help="stop criteria as a JSON object {result_key: value}, e.g. "
                             "'{\"training_iteration\": 30}'; keys: training_iteration, timesteps_total, "
                             "num_env_steps_sampled_lifetime, time_total_s, episode_reward_mean, or any nested "
                             "result key written a/b such as env_runners/episode_return_mean")
    parser.add_argument("--checkpoint-freq", type=non_negative_int, default=None, metavar="N",
                        help="save a checkpoint every N training iterations (default: 0, none on the way)")
    parser.add_argument("--checkpoint-at-end", action=argparse.BooleanOptionalAction, default=None,
                        help="save a checkpoint when training ends (default: on)")
    parser.add_argument("--keep-checkpoints-num", type=positive_int, default=None, metavar="N",
                        help="keep only N checkpoints: the most recent, or the best N by "
                             "--checkpoint-score-attribute, plus the latest (default: keep all)")
    parser.add_argument("--checkpoint-score-attribute", default=None, metavar="KEY",
                        help="result key that ranks checkpoints, e.g. env_runners/episode_return_mean: "
                             "--keep-checkpoints-num keeps the best, and the summary names the best checkpoint")
    parser.add_argument("--checkpoint-score-order", choices=("max", "min"), default=None,
                        help="whether a higher (max, the default) or lower score is better")
    parser.add_argument("--storage-path", "--local-dir", dest="storage_path", default=None, metavar="DIR",
                        help="root directory of the results (default: $RLX_RESULTS_DIR or ~/rlx_results)")
    parser.add_argument("--experiment-name", default=None, metavar="NAME",
                        help="subdirectory of the storage path for this experiment "
                             "(default: 'default', or the experiment's name in a file)")
    parser.add_argument("--framework", default=None, metavar="torch",
                        help="deep-learning framework; rlx is PyTorch-only, so only 'torch' is accepted")
    parser.add_argument("--torch", action="store_true", help="same as --framework torch (old flag)")
    parser.add_argument("--seed", type=int, default=None, help="random seed of the run (same seed, same results)")
    parser.add_argument("--restore", default=None, metavar="CHECKPOINT",
                        help="continue training from this checkpoint directory (its weights, optimizer state and "
                             "counters); --algo and --env default to the checkpoint's")
    parser.add_argument("--no-progress", action="store_true",
                        help="print one plain line per iteration even on a terminal")
    parser.add_argument("--wandb-project", default=None, metavar="PROJECT",
                        help="also log each result to this Weights & Biases project (needs wandb)")
    parser.add_argument("--mlflow-uri", default=None, metavar="URI",
                        help="also log each result to the MLflow tracking server or store at URI, e.g. "
                             "file:///tmp/mlruns (needs mlflow-skinny)")
    _add_imports(parser)
    _add_verbosity(parser)


def _add_serve_parser(sub: Any) -> None:
    """Register the `serve` subcommand on the CLI's subparsers."""
    serve = sub.add_parser(
        "serve", help="serve a trained policy for inference over HTTP",
        description="Load the policy of a checkpoint and answer action requests over HTTP (JSON bodies), as a "
                    "policy server does: PolicyClient(url, inference_mode='remote' or 'local') works against it, "
                    "and POST / {\"command\": \"COMPUTE_ACTIONS\", \"observations\": [...]} answers a batch. "
                    "See docs/external.md.",
    )
    serve.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory (from rlx train or algo.save())")
    serve.add_argument("--port", type=int, default=9900, help="port to listen on (0 picks a free one; default 9900)")
    serve.add_argument("--address", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; any other needs an auth token)")
    serve.add_argument("--auth-token-file", default=None, metavar="FILE",
                       help="file holding the token clients must send as 'Authorization: Bearer <token>' "
                            "(default: $RLX_POLICY_SERVER_TOKEN)")
    serve.add_argument("--explore", action=argparse.BooleanOptionalAction, default=False,
                       help="sample actions instead of taking the greedy one (default: --no-explore)")
    serve.add_argument("--max-request-bytes", type=int, default=1 << 20, metavar="N",
                       help="largest request body accepted (default 1 MiB)")
    serve.add_argument("--max-connections", type=int, default=256, metavar="N",
                       help="connections served at once; one more is answered 503 (default 256)")
    serve.add_argument("--request-timeout-s", type=float, default=30.0, metavar="S",
                       help="a request must arrive whole within S seconds of its first byte, else 408 (default 30)")
    serve.add_argument("--idle-timeout-s", type=float, default=60.0, metavar="S",
                       help="close a keep-alive connection idle this long (default 60)")
    serve.add_argument("--config", default=None, metavar="JSON",
                       help="settings to override in the checkpoint's config, as a JSON object")
    serve.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import a module first (e.g. one that registers the env); repeatable")
    serve.add_argument("--env", default=None, metavar="ENV",
                       help="serve with this env instead of the checkpoint's (needed when the checkpoint could not "
                            "store its env, e.g. a class defined inside a function): a registered name (with "
                            "--import MODULE), a Gymnasium id, or 'package.module:MyEnv'")
    serve.add_argument("-v", "--verbose", action="count", default=0, help="more output (-vv: tracebacks)")


def _add_export_parsers(sub: Any) -> None:
    """`rlx export` (a checkpoint's policy as TorchScript or ONNX) and `rlx hub push|download`."""
    export = sub.add_parser(
        "export", help="export a checkpoint's policy as a TorchScript or ONNX model that runs without rlx",
        description="Write the policy of a checkpoint as a model file that runs without rlx: TorchScript "
                    "(model.pt, for torch.jit.load) or ONNX (model.onnx, for onnxruntime; needs the onnx package). "
                    "The model maps env observations to greedy actions; export_info.json names its inputs and "
                    "outputs.")
    export.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory (from rlx train or algo.save())")
    export.add_argument("--format", choices=("torchscript", "onnx"), default="torchscript",
                        help="file format (default: torchscript)")
    export.add_argument("--policy-id", dest="policy_id", default="default_policy", metavar="ID",
                        help="policy to export (default: default_policy)")
    export.add_argument("--out", default="exported_model", metavar="DIR",
                        help="directory to write into (default: ./exported_model)")
    export.add_argument("--opset", type=positive_int, default=None, metavar="N",
                        help="ONNX opset version (default: 17)")
    _add_imports(export)
    _add_verbosity(export)

    hub = sub.add_parser("hub", help="push a checkpoint to, or download one from, the Hugging Face Hub",
                         description="Share checkpoints on the Hugging Face Hub (needs huggingface_hub).")
    hub_sub = hub.add_subparsers(dest="hub_command", metavar="ACTION", parser_class=_Parser, required=True)
    push = hub_sub.add_parser("push", help="upload a checkpoint with a generated model card (README.md)",
                              description="Upload a checkpoint directory to a Hub model repository (created when "
                                          "missing), with a model card naming the algorithm, env, return and config.")
    push.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory")
    push.add_argument("repo_id", metavar="REPO_ID", help="Hub repository, e.g. my-name/ppo-cartpole")
    push.add_argument("--private", action="store_true", help="create the repository as private")
    push.add_argument("--message", default=None, metavar="TEXT", help="commit message")
    download = hub_sub.add_parser("download", help="download a checkpoint from a Hub repository",
                                  description="Download the checkpoint in a Hub repository into a local folder.")
    download.add_argument("repo_id", metavar="REPO_ID", help="Hub repository, e.g. my-name/ppo-cartpole")
    download.add_argument("--out", default=None, metavar="DIR",
                          help="folder to download into (default: ~/.cache/rlx/hub/<owner>--<name>)")
    download.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit")
    for action in (push, download):
        action.add_argument("--token", default=None, metavar="TOKEN",
                            help="Hub access token (default: the one `hf auth login` stored, or HF_TOKEN)")
        _add_verbosity(action)


def build_parser() -> argparse.ArgumentParser:
    """The `rlx` argument parser with every command."""
    parser = _Parser(
        prog="rlx",
        description="rlx: reinforcement learning with RLlib's API. Train, evaluate and inspect algorithms.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'rlx COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="store_true", help="print rlx's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    train = sub.add_parser(
        "train", help="train an algorithm on an environment",
        description="Train an algorithm on an environment, logging results and checkpoints to a trial directory. "
                    "'rlx train file PATH' runs the experiments of a YAML, JSON or Python file.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG_TRAIN,
    )
    train.add_argument("--algo", "--run", dest="algo", default=None, metavar="ALGO",
                       help=f"algorithm to train: {', '.join(list_algorithms())} (see 'rlx list')")
    train.add_argument("--env", default=None, help=ENV_HELP)
    train.add_argument("--config", type=json_arg("--config"), default=None, metavar="JSON",
                       help="algorithm settings as a JSON object, e.g. '{\"lr\": 0.0003, \"gamma\": 0.99}' "
                            "(any key of the algorithm's config, old names included)")
    train.add_argument("-f", "--config-file", dest="config_file", default=None, metavar="PATH",
                       help="run the experiments of a file (same as 'rlx train file PATH')")
    _add_run_options(train, from_file=False)

    train_file = _Parser(
        prog="rlx train file",
        description="Run the experiments of a YAML, JSON or Python file, one after another.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG_FILE,
    )
    train_file.add_argument("path", metavar="PATH",
                            help="experiment file (.yaml, .yml, .json or .py), or an http(s) URL of a YAML/JSON one")
    train_file.add_argument("--algo", "--run", dest="algo", default=None, metavar="ALGO",
                            help="algorithm, for Python files whose `config` is a plain dict")
    train_file.add_argument("--config", type=json_arg("--config"), default=None, metavar="JSON",
                            help="settings applied on top of each experiment's config")
    _add_run_options(train_file, from_file=True)
    parser._rlx_train_file = train_file  # type: ignore[attr-defined]

    evaluate_help = "run a trained policy from a checkpoint and report its episodes"
    for name in ("evaluate", "rollout"):
        ev = sub.add_parser(
            name, help=evaluate_help if name == "evaluate" else "same as evaluate (old name)",
            description="Run the policy of a checkpoint in its environment and print each episode's return and "
                        "length, then a summary. --algo and --env default to what the checkpoint records.",
        )
        ev.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory (from rlx train or algo.save())")
        ev.add_argument("--algo", "--run", dest="algo", default=None, metavar="ALGO",
                        help="algorithm of the checkpoint (default: the one it records)")
        ev.add_argument("--env", default=None, help="environment to run in (default: the checkpoint's)")
        amount = ev.add_mutually_exclusive_group()
        amount.add_argument("--episodes", type=positive_int, default=None, metavar="N",
                            help="number of episodes to run (default: 10)")
        amount.add_argument("--steps", type=positive_int, default=None, metavar="N",
                            help="run this many env steps instead (the last episode may be cut short)")
        ev.add_argument("--explore", action=argparse.BooleanOptionalAction, default=False,
                        help="sample actions from the policy's distribution instead of taking the greedy action "
                             "(default: --no-explore)")
        ev.add_argument("--render", action="store_true", help="render the environment in a window while running")
        ev.add_argument("--video-dir", default=None, metavar="DIR",
                        help="record a video of every episode into DIR (needs moviepy)")
        ev.add_argument("--out", default=None, metavar="FILE",
                        help="write the episodes (returns, lengths and every step) to FILE as JSON")
        ev.add_argument("--seed", type=int, default=None, help="seed of the environment resets")
        ev.add_argument("--config", type=json_arg("--config"), default=None, metavar="JSON",
                        help="settings to override in the checkpoint's config, e.g. '{\"env_config\": {...}}'")
        _add_imports(ev)
        _add_verbosity(ev)

    lst = sub.add_parser("list", help="list the available algorithms",
                         description="List the algorithms rlx can train, with a one-line description each.")
    _add_verbosity(lst)

    _add_serve_parser(sub)

    plot = sub.add_parser(
        "plot", help="plot learning curves from a results directory",
        description="Plot a metric of every trial found under RESULTS_DIR (a trial directory, an experiment "
                    "directory or the whole results root) against env steps. Needs matplotlib.",
    )
    plot.add_argument("results_dir", metavar="RESULTS_DIR", help="directory holding one or more trials")
    plot.add_argument("--metric", default=None, metavar="KEY",
                      help="result key to plot, nested keys written a/b (default: env_runners/episode_return_mean)")
    plot.add_argument("--x", dest="x_key", default="num_env_steps_sampled_lifetime", metavar="KEY",
                      help="result key of the x axis (default: num_env_steps_sampled_lifetime)")
    plot.add_argument("--out", default=None, metavar="FILE.png",
                      help="image file to write (default: learning_curves.png in RESULTS_DIR)")
    _add_verbosity(plot)

    stack = sub.add_parser(
        "stack", help="print the Python stacks of every rlx process on this machine",
        description="Print the Python stack of every thread of each running rlx process on this machine: drivers "
                    "that built an Algorithm, EnvRunner, learner and sub-env processes, and EnvRunner Ray actors "
                    "on this node (RLlib's 'ray stack'). Uses py-spy when installed, else rlx's faulthandler "
                    "(SIGUSR1). Useful for hangs and slow runs.",
    )
    stack.add_argument("--pid", type=positive_int, default=None, metavar="PID",
                       help="only this rlx process and the rlx processes it started (default: all)")
    stack.add_argument("--timeout", type=positive_float, default=5.0, metavar="SECONDS",
                       help="longest wait for the processes' dumps (default: 5)")
    stack.add_argument("--no-py-spy", action="store_true",
                       help="use rlx's faulthandler dumps even when py-spy is installed")
    _add_verbosity(stack)
    _add_export_parsers(sub)
    return parser


def _configure_logging(verbose: int) -> None:
    if verbose <= 0:
        return
    level = logging.DEBUG if verbose >= 2 else logging.INFO
    rlx_logger = logging.getLogger("rlx")
    rlx_logger.setLevel(level)
    if not rlx_logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s -- %(message)s"))
        rlx_logger.addHandler(handler)


def _dispatch(args: argparse.Namespace) -> int:
    # Each command imports its own module: `rlx list` or `rlx --help` load no algorithm, torch or Ray.
    if args.command in ("train", "train file"):
        from rlx.cli.train import run_train_command, run_train_file_command

        return run_train_command(args) if args.command == "train" else run_train_file_command(args)
    if args.command in ("evaluate", "rollout"):
        from rlx.cli.evaluate import run_evaluate_command

        return run_evaluate_command(args)
    if args.command == "list":
        from rlx.cli.listing import run_list_command

        return run_list_command(args)
    if args.command == "serve":
        from rlx.cli.serve import run_serve_command

        return run_serve_command(args)
    if args.command == "plot":
        from rlx.cli.plot import run_plot_command

        return run_plot_command(args)
    if args.command == "stack":
        from rlx.cli.stack import run_stack_command

        return run_stack_command(args)
    if args.command == "export":
        from rlx.cli.export import run_export_command

        return run_export_command(args)
    if args.command == "hub":
        from rlx.cli.hub import run_hub_command

        return run_hub_command(args)
    raise CLIError(f"unknown command {args.command!r}")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a command line (without the program name)."""
    parser = build_parser()
    argv = list(argv)
    if len(argv) >= 2 and argv[0] == "train" and argv[1] == "file":
        args = parser._rlx_train_file.parse_args(argv[2:])  # type: ignore[attr-defined]
        args.command = "train file"
        return args
    args = parser.parse_args(argv)
    if args.command == "train" and args.config_file:
        args.command = "train file"
        args.path = args.config_file
    if args.command is None and not getattr(args, "version", False):
        parser.print_help()
        raise SystemExit(2)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `rlx` command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if getattr(args, "version", False):
        print(f"rlx {__version__}")
        return 0
    verbose = getattr(args, "verbose", 0)
    _configure_logging(verbose)

    add_cwd_to_sys_path(_checkpoint_argument(args))
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("\nrlx: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # every failure becomes one line unless -vv asks for the traceback
        if verbose >= 2:
            raise
        print(f"rlx: error: {describe_error(err)}", file=sys.stderr)
        return 1


def _checkpoint_argument(args: argparse.Namespace) -> str | None:
    """The checkpoint a command loads (evaluate, serve, train --restore), if any."""
    return getattr(args, "checkpoint", None) or getattr(args, "restore", None)


def describe_error(err: BaseException) -> str:
    """One line describing `err`: rlx's own errors speak for themselves, others get their type."""
    message = str(err).strip() or type(err).__name__
    if isinstance(err, (RLXError, CLIError, FileNotFoundError)):
        text = message
    else:
        text = f"{type(err).__name__}: {message}"
    text = " ".join(text.split())
    if not isinstance(err, (RLXError, CLIError, FileNotFoundError)):
        text += " (run with -vv for the traceback)"
    return text


def entry_point() -> Any:
    """Console-script entry: exit with main()'s status."""
    raise SystemExit(main())
