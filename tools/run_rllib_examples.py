"""Run RLlib's own example scripts against rlx, the way a user porting them would.

    python tools/run_rllib_examples.py                          # the default set, 2 at a time
    python tools/run_rllib_examples.py --dirs envs multi_agent  # only these example folders
    python tools/run_rllib_examples.py --scripts envs/custom_gym_env.py --timeout 300
    python tools/run_rllib_examples.py --jobs 2 --json results.json

Each script is taken from the `ray/rllib/examples/` folder of the installed Ray wheel,
copied alone into a fresh temporary directory (nothing of RLlib is copied into this
repository), rewritten with `s/ray\\.rllib/rlx/g` (imports and dotted names in strings
alike), and run with the rlx venv's Python in a subprocess with small budgets:

- scripts built on `add_rllib_example_script_args` get
  `--stop-iters=2 --stop-timesteps=2000 --no-tune --num-env-runners=0`;
- other scripts get those of the flags that they define themselves (e.g. the old API
  stack's own `--stop-iters`);
- EXTRA_ARGS below adds per-script flags (NEEDS_TUNE drops --no-tune), TIMEOUTS per-script time limits, SKIP per-script
  reasons not to run at all, and REQUIRES third-party modules whose absence skips a script.

Every run gets its own `RLX_RESULTS_DIR` and `HOME` (in the temp dir, so that Tune's
`~/ray_results` lands there too) and a time limit (default 120 s); on a timeout, or when
the script exits, whatever is left of its process group (e.g. Ray workers) is killed. A script passes when it exits with status 0 and (if it ran Tune) Tune reports no errored
trial; otherwise the
report names its first useful error line: the exception line that ends the last
traceback (e.g. `ModuleNotFoundError: No module named 'rlx.connectors'`), else the last
line of output. The summary prints `N passed, M failed, K skipped`, then the failures
grouped by error, most common first, then the passing scripts. The full output of each
run is kept under --log-dir (a new temp dir unless given). Exit status: 1 if any script
failed, else 0.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PYTHON = ROOT / ".venv" / "bin" / "python"

# Example folders run by default (those missing from the installed Ray are ignored).
# Only the top-level scripts of each folder run: helper modules live in sub-folders
# (classes/, utils/, models/, policy/), which is also why `_old_api_stack` is top-level only.
DEFAULT_DIRS = [
    "envs", "multi_agent", "connectors", "rl_modules", "learners", "ray_tune",
    "_old_api_stack", "algorithms", "evaluation", "checkpoints", "metrics", "curriculum",
    "fault_tolerance", "actions", "gpus", "offline_rl", "ray_serve",
]

# The small budget. Scripts using `add_rllib_example_script_args` get all of it; other
# scripts get only the flags they define themselves.
BUDGET_ARGS = ["--stop-iters=2", "--stop-timesteps=2000", "--no-tune", "--num-env-runners=0"]
DEFAULT_TIMEOUT_S = 120.0
MAX_JOBS = 2

# Per-script tables, keyed by the path relative to ray/rllib/examples/.
# Extra command-line flags, appended after the budget (so they may override it).
EXTRA_ARGS: dict[str, list[str]] = {
    # Without it the script starts no client and waits for one to connect.
    "envs/env_connecting_to_rllib_w_tcp_client.py": ["--use-dummy-client"],
    # The script ends with plt.pause(--pause-plot-secs), 1000 s by default.
    "algorithms/maml_lr_supervised_learning.py": ["--pause-plot-secs=1"],
    # The script asserts this itself (its env has two agents).
    "multi_agent/two_step_game_with_grouped_agents.py": ["--num-agents=2"],
    # Its default asks for a GPU learner; this machine (and CI) has none.
    "ray_tune/appo_hyperparameter_tune.py": ["--num-gpus-per-learner=0"],
    # Its trial asks Ray for 4 EnvRunners + the driver: declare enough logical CPUs on 2 cores.
    "_old_api_stack/replay_buffer_api.py": ["--num-cpus=8"],
    # The script refuses to run without agents; pre-training stops at this return instead of 250.
    "rl_modules/pretraining_single_agent_training_multi_agent.py": ["--num-agents=2",
                                                                    "--stop-reward-pretraining=150"],
}
# Scripts that read Tune's ResultGrid (`results.get_best_result().checkpoint`): they run
# without the budget's --no-tune.
NEEDS_TUNE: set[str] = {
    "rl_modules/pretraining_single_agent_training_multi_agent.py",
    "offline_rl/cartpole_recording.py",
}
# Time limits other than --timeout, in seconds.
TIMEOUTS: dict[str, float] = {
    # Trains a recurrent PPO policy to a return of 350 whatever the budget flags say.
    "rl_modules/migrate_modelv2_to_new_api_stack_by_config.py": 300.0,
    # Atari (Pong) frames: slower to step and to learn from than the classic-control envs.
    "connectors/frame_stacking.py": 300.0,
    "rl_modules/custom_cnn_rl_module.py": 300.0,
    "envs/env_rendering_and_recording.py": 300.0,
    # A 12-trial Tune sweep.
    "ray_tune/appo_hyperparameter_tune.py": 300.0,
}
# Scripts not run at all, with the reason: things rlx could not make work anyway.
SKIP: dict[str, str] = {
    "_old_api_stack/attention_net_supervised.py":
        "TensorFlow-only (imports rllib.models.tf.attention_net, a path broken in RLlib too)",
    "_old_api_stack/parametric_actions_cartpole_embeddings_learnt_by_model.py":
        "TensorFlow-only: its --framework accepts only tf/tf2, rlx is PyTorch-only",
    "multi_agent/self_play_footsies.py":
        "downloads the Footsies game binary from the internet",
    "offline_rl/offline_rl_with_image_data.py":
        "reads its images from s3://anonymous@ray-example-data over the internet (rlx's ImageOfflineData and "
        "ImageOfflinePreLearner run on local images in tests/offline/test_offline_user_classes.py)",
    "ray_serve/ray_serve_with_rllib.py":
        "starts Ray Serve's `serve run` on RLlib's own classes/cartpole_deployment.py, which this tool does not "
        "copy (rlx serves checkpoints with `rlx serve`)",
}
# Third-party modules a script needs beyond rlx's own dependencies: the script is skipped
# when the target Python cannot find one of them.
REQUIRES: dict[str, list[str]] = {
    "multi_agent/self_play_with_open_spiel.py": ["pyspiel"],
    "multi_agent/self_play_league_based_with_open_spiel.py": ["pyspiel"],
    # pettingzoo.sisl's Waterworld needs pymunk.
    "multi_agent/pettingzoo_independent_learning.py": ["pettingzoo", "pymunk"],
    "multi_agent/pettingzoo_parameter_sharing.py": ["pettingzoo", "pymunk"],
    # Atari games (ale_py, and its ROMs) by default.
    "connectors/frame_stacking.py": ["ale_py"],
    "rl_modules/custom_cnn_rl_module.py": ["ale_py"],
    "envs/env_rendering_and_recording.py": ["ale_py"],
}

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"

_PREFIX = re.compile(r"ray\.rllib")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_ERRORED_TRIALS = re.compile(r"Number of errored trials: (\d+)")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")


@dataclass
class Result:
    """The outcome of one example script."""

    script: str
    status: str
    error: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    args: list[str] = field(default_factory=list)
    log: str = ""


def find_examples_dir(python: Path) -> Path:
    """The `ray/rllib/examples` folder of the Ray installed for `python` (found without
    importing Ray)."""
    code = ("import importlib.util as u; s = u.find_spec('ray'); "
            "print(s.submodule_search_locations[0] if s else '')")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    ray_dir = out.stdout.strip()
    if not ray_dir:
        raise SystemExit(f"{python}: Ray is not installed, so there are no RLlib examples to run")
    examples = Path(ray_dir) / "rllib" / "examples"
    if not examples.is_dir():
        raise SystemExit(f"{examples} does not exist")
    return examples


def discover_scripts(examples: Path, dirs: list[str]) -> list[str]:
    """The top-level example scripts (not `__init__.py`) of each folder in `dirs`, as paths
    relative to `examples`, sorted; folders that do not exist are ignored."""
    scripts: list[str] = []
    for d in dirs:
        folder = examples / d
        if not folder.is_dir():
            continue
        scripts.extend(p.relative_to(examples).as_posix() for p in sorted(folder.glob("*.py"))
                       if p.name != "__init__.py")
    return scripts


def normalize_script(examples: Path, given: str) -> str:
    """A --scripts entry (relative to the examples folder, or any path inside it) as a path
    relative to `examples`."""
    path = Path(given)
    if path.is_absolute():
        try:
            return path.resolve().relative_to(examples.resolve()).as_posix()
        except ValueError:
            raise SystemExit(f"{given} is not inside {examples}") from None
    if not (examples / path).is_file():
        raise SystemExit(f"{examples / path} does not exist")
    return path.as_posix()


def missing_modules(python: Path, modules: set[str]) -> set[str]:
    """Which of `modules` the target `python` cannot find."""
    if not modules:
        return set()
    code = ("import importlib.util as u, sys\n"
            "for m in sys.argv[1:]:\n"
            "    try:\n"
            "        found = u.find_spec(m) is not None\n"
            "    except Exception:\n"
            "        found = False\n"
            "    if not found: print(m)\n")
    out = subprocess.run([str(python), "-c", code, *sorted(modules)], capture_output=True,
                         text=True, check=True)
    return set(out.stdout.split())


def rewrite_source(source: str) -> str:
    """The script with RLlib's prefix swapped for rlx's: `ray.rllib` -> `rlx` everywhere,
    in imports and in dotted names inside strings alike."""
    return _PREFIX.sub("rlx", source)


def script_args(rel: str, source: str) -> list[str]:
    """The command-line flags `rel` runs with: the whole budget when it builds its parser
    with `add_rllib_example_script_args`, else the budget flags it defines itself; then
    its EXTRA_ARGS."""
    if "add_rllib_example_script_args" in source:
        args = list(BUDGET_ARGS)
    else:
        args = [a for a in BUDGET_ARGS
                if re.search(r"""["']%s["']""" % re.escape(a.split("=")[0]), source)]
    if rel in NEEDS_TUNE:
        args = [a for a in args if a != "--no-tune"]
    return args + EXTRA_ARGS.get(rel, [])


def first_useful_error(output: str, tmp: str = "") -> str:
    """The line that best names why a run failed: the exception line ending the last
    traceback in `output`, else the last line that looks like an exception, else the last
    non-empty line. `tmp` (the run's temp dir) is replaced by `<tmp>`."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    error = ""
    if starts:
        tail = lines[starts[-1] + 1:]
        for j, line in enumerate(tail):
            if line.strip() and not line[0].isspace():
                error = line.strip()
                # "SomeError:" alone: its message is on the following line(s).
                if error.endswith(":"):
                    rest = next((t.strip() for t in tail[j + 1:] if t.strip()), "")
                    error = f"{error} {rest}".strip()
                break
    if not error:
        error = next((line.strip() for line in reversed(lines) if _EXCEPTION_LINE.match(line.strip())), "")
    if not error:
        error = next((line.strip() for line in reversed(lines) if line.strip()), "(no output)")
    if tmp:
        error = error.replace(tmp, "<tmp>")
    return error[:400]


def _kill_group(pgid: int) -> None:
    """Kill what is left of the process group this tool started for one script."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    time.sleep(0.5)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_script(examples: Path, rel: str, python: Path, timeout: float, log_dir: Path) -> Result:
    """Copy `rel` alone into a fresh temp dir, swap the prefix, run it with `python` and
    the small budget, and return how it went; its full output goes to `log_dir`."""
    source = (examples / rel).read_text()
    args = script_args(rel, source)
    timeout = TIMEOUTS.get(rel, timeout)
    log_path = log_dir / (rel.replace("/", "__").removesuffix(".py") + ".log")
    with tempfile.TemporaryDirectory(prefix="rlx_example_") as tmp:
        script = Path(tmp) / Path(rel).name
        script.write_text(rewrite_source(source))
        results_dir, home = Path(tmp) / "results", Path(tmp) / "home"
        results_dir.mkdir()
        home.mkdir()
        env = dict(os.environ)
        # HOME too, so that what a script writes under ~ (Tune's ~/ray_results) stays here.
        env.update(RLX_RESULTS_DIR=str(results_dir), HOME=str(home), PYTHONUNBUFFERED="1",
                   MPLBACKEND="Agg", SDL_VIDEODRIVER="dummy", PYTHONDONTWRITEBYTECODE="1")
        cmd = [str(python), script.name, *args]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, _ = proc.communicate()
        finally:
            _kill_group(proc.pid)  # Ray workers and the like the script left behind
        seconds = time.monotonic() - start
        text = out.decode(errors="replace")
        log_path.write_text(f"$ {' '.join(cmd)}\n(cwd {tmp})\n\n{text}")
        if timed_out:
            return Result(rel, FAILED, f"Timeout: still running after {timeout:g} s", None,
                          seconds, args, str(log_path))
        errored = _ERRORED_TRIALS.search(text)
        if proc.returncode == 0 and not (errored and int(errored.group(1)) > 0):
            return Result(rel, PASSED, "", 0, seconds, args, str(log_path))
        if proc.returncode == 0:
            # Tune reports a failed trial and the script still exits 0: the run did not complete.
            error = f"Tune trial errored: {first_useful_error(text, tmp)}"
            return Result(rel, FAILED, error, 0, seconds, args, str(log_path))
        error = first_useful_error(text, tmp)
        if proc.returncode < 0:
            error = f"{error} [killed by signal {-proc.returncode}]"
        return Result(rel, FAILED, error, proc.returncode, seconds, args, str(log_path))


def error_group(error: str) -> str:
    """The key failures are grouped under: the error line with addresses blanked."""
    return _HEX.sub("0x…", error)


def print_summary(results: list[Result]) -> None:
    """Print the summary line, the failures grouped by error (most common first), the
    skipped scripts and the passing ones."""
    by_status: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_status[r.status].append(r)
    passed, failed, skipped = by_status[PASSED], by_status[FAILED], by_status[SKIPPED]
    print()
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    groups: dict[str, list[str]] = defaultdict(list)
    for r in failed:
        groups[error_group(r.error)].append(r.script)
    if groups:
        print("\nFailures by error (most common first):")
        for error, scripts in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"\n  [{len(scripts)}] {error}")
            for s in sorted(scripts):
                print(f"      {s}")
    if skipped:
        print("\nSkipped:")
        for r in sorted(skipped, key=lambda r: r.script):
            print(f"  {r.script}: {r.error}")
    if passed:
        print("\nPassed:")
        for r in sorted(passed, key=lambda r: r.script):
            print(f"  {r.script} ({r.seconds:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 if any script failed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dirs", nargs="+", default=None, metavar="DIR",
                        help="example folders to run (default: %s)" % " ".join(DEFAULT_DIRS))
    parser.add_argument("--scripts", nargs="+", default=None, metavar="PATH",
                        help="individual scripts, relative to ray/rllib/examples/ (e.g. "
                             "envs/custom_gym_env.py); combined with --dirs when both are given")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="time limit per script in seconds (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=1,
                        help=f"scripts run at once (default: 1, at most {MAX_JOBS} and the CPU count)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write the results to this JSON file")
    parser.add_argument("--python", type=Path,
                        default=DEFAULT_PYTHON if DEFAULT_PYTHON.exists() else Path(sys.executable),
                        help="the Python the scripts run with (default: %(default)s)")
    parser.add_argument("--examples-dir", type=Path, default=None,
                        help="RLlib's examples folder (default: the one of the Ray installed for --python)")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="where each script's full output goes (default: a new temp dir)")
    args = parser.parse_args(argv)

    examples = args.examples_dir or find_examples_dir(args.python)
    scripts: list[str] = []
    if args.dirs is not None or args.scripts is None:
        scripts += discover_scripts(examples, args.dirs if args.dirs is not None else DEFAULT_DIRS)
    if args.scripts:
        scripts += [normalize_script(examples, s) for s in args.scripts]
    scripts = list(dict.fromkeys(scripts))  # keep order, drop repeats
    if not scripts:
        print("no scripts selected", file=sys.stderr)
        return 2

    missing = missing_modules(args.python, {m for s in scripts for m in REQUIRES.get(s, [])})
    results: list[Result] = []
    to_run: list[str] = []
    for s in scripts:
        absent = [m for m in REQUIRES.get(s, []) if m in missing]
        if s in SKIP:
            results.append(Result(s, SKIPPED, SKIP[s]))
        elif absent:
            results.append(Result(s, SKIPPED, "needs " + ", ".join(absent) + " (not installed)"))
        else:
            to_run.append(s)

    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="rlx_examples_logs_"))
    log_dir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(args.jobs, MAX_JOBS, os.cpu_count() or 1))
    print(f"Running {len(to_run)} RLlib example scripts from {examples} with {args.python}, "
          f"{jobs} at a time, {args.timeout:g} s each ({len(results)} skipped); logs in {log_dir}",
          flush=True)
    done = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_script, examples, s, args.python, args.timeout, log_dir): s
                   for s in to_run}
        for fut in as_completed(futures):
            r = fut.result()
            results.append(r)
            done += 1
            line = f"[{done:>3}/{len(to_run)}] {r.status.upper():6} {r.script} ({r.seconds:.1f} s)"
            if r.error:
                line += f": {r.error}"
            print(line, flush=True)

    results.sort(key=lambda r: r.script)
    print_summary(results)
    if args.json:
        counts = {k: sum(r.status == k for r in results) for k in (PASSED, FAILED, SKIPPED)}
        args.json.write_text(json.dumps({"examples_dir": str(examples), "python": str(args.python),
                                         "timeout_s": args.timeout, "counts": counts,
                                         "results": [asdict(r) for r in results]}, indent=2) + "\n")
    print(f"\nFull output of each run: {log_dir}")
    return 1 if any(r.status == FAILED for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
