"""Train a tuned example for an env-step budget over several seeds and write its return curves,
beside Stable-Baselines3 + rl-zoo3 at the same budget when an anchors environment is present.

Usage:
    python benchmarks/learning_curves.py EXAMPLE --steps N [--seeds 0,1,2] [--out DIR]
                                         [--anchors-python PATH]
                                         [--side-by-side | --only rlx|sb3 [--core N]] [--config JSON]
    python benchmarks/learning_curves.py --merge DIR [DIR ...] --out DIR
    python benchmarks/learning_curves.py --replot DIR

EXAMPLE is a tuned example's path or name (e.g. tuned_examples/sac/halfcheetah-sac.yaml or
halfcheetah-sac). Each rlx seed runs `rlx train file EXAMPLE --seed S` in a fresh process with
the stop criterion replaced by `num_env_steps_sampled_lifetime >= N` (start-up included in the
wall time), under `nice -n 10`. Written to DIR (default benchmarks/results/<example>):

- `curves.json`: {"rlx": {seed: {"steps": [...], "return": [...], "wall_s": s}}, "sb3": ...}
  and a summary: final return (mean +- std over seeds) and mean wall time per library;
- `curves.csv`: library, seed, env steps, return (one row per iteration / episode);
- `rlx_curves.png`: `rlx plot` of the rlx trials (needs the `plot` extra);
- `curves.png`: every seed's curve of both libraries on one chart (needs matplotlib).

`--replot DIR` redraws `curves.png` from an existing `curves.json` without training.
`--merge DIR [DIR ...] --out OUT` combines runs of the same example and budget made with
different seeds (e.g. one seed per session) into one report in OUT, summary and chart included.

`--side-by-side` runs each seed of the two libraries at the same time, each pinned (taskset) to
a core of its own with one torch/BLAS thread: on a 2-core machine this halves the wall time of
a comparison and gives both libraries the same hardware; the wall times are then one-core ones.

`--config JSON` overrides the example's config in the rlx runs (a variant; the report records it
and `--merge` only combines runs with the same overrides).

`--only rlx|sb3` runs one library's half of a comparison and `--core N` pins it to core N with one
thread, as `--side-by-side` pins each library: on a 2-core machine the two halves of a comparison
can then run on whichever core is free (e.g. the next workload's rlx half while SB3 finishes the
previous one) and be combined with `--merge` afterwards.

Stable-Baselines3 runs when an anchors interpreter is given (`--anchors-python`, or
$ANCHORS_PYTHON, or ~/anchors-venv/bin/python when ../shared/anchors exists) and has rl_zoo3:
`python -m rl_zoo3.train --algo ALGO --env ENV -n N --seed S` with rl-zoo3's own hyperparameters
for the env (the example's `env_config` as `--env-kwargs`); its returns come from the Monitor
files rl-zoo3 writes (mean of the last 10 episodes, as the rlx MuJoCo examples smooth over 5-10).
rl-zoo3's linear rates (`lin_2.5e-4`) decay over the N steps it is given, so an example whose
`lr` schedule ends at its own stop step count runs with that schedule rescaled to N.

Atari (ALE/<Game>-v5): rl-zoo3's `atari` settings; both libraries step the env with frameskip 1
and skip 4 frames in their DeepMind wrappers. rlx ends an episode at each lost life, SB3's Monitor
counts whole games, so the rlx curve is `env_runners/game_score` (whole-game scores, mean of the
last 10 games, from benchmarks/atari_game_score.py) and the SB3 curve's steps are its Monitor's
frames / 4.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SB3_WINDOW = 10
#: On Atari, rlx's episodes end at each lost life; these callbacks also log whole-game scores
#: (`env_runners/game_score`), which is what SB3's Monitor and published scores count.
GAME_SCORE_CALLBACKS = "benchmarks.atari_game_score.GameScore"
ATARI_FRAME_SKIP = 4


def is_atari_id(env: str) -> bool:
    """Whether `env` names an ALE game (ALE/<Game>-v5 or <Game>NoFrameskip-v4)."""
    return env.startswith("ALE/") or "NoFrameskip" in env


def pinned(core: int | None) -> list[str]:
    """The command prefix that runs a process on `core` only (none when `core` is None)."""
    return [] if core is None else ["taskset", "-c", str(core)]


def one_thread_env(core: int | None) -> dict[str, str] | None:
    """The environment of a process pinned to one core: one OpenMP/MKL thread (None: inherit)."""
    if core is None:
        return None
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def budget_lr(spec: dict, steps: int) -> list | None:
    """The example's learning-rate schedule stretched or shrunk to `steps` when it ends at the
    example's own step budget (rl-zoo3's `lin_` rates decay over the run it is given, whatever its
    length); None when the example's rate is not such a schedule."""
    lr = spec.get("config", {}).get("lr")
    planned = spec.get("stop", {}).get("num_env_steps_sampled_lifetime")
    if not (isinstance(lr, list) and planned and lr and lr[-1][0] == planned):
        return None
    return [[round(t * steps / planned), value] for t, value in lr]


def rlx_curve(example: str, steps: int, seed: int, out: Path, core: int | None = None, atari: bool = False,
              lr: list | None = None, config: dict | None = None) -> dict:
    """Train `example` with `seed` for `steps` env steps through the CLI (on `core` only, if
    given; with the learning-rate schedule `lr` and the config overrides `config`, if given); its
    return curve (whole-game scores on Atari) and wall time."""
    storage = out / "rlx"
    name = f"seed_{seed}"
    overrides = {**({"callbacks": GAME_SCORE_CALLBACKS} if atari else {}), **({"lr": lr} if lr else {}),
                 **(config or {})}
    extra = ["--config", json.dumps(overrides)] if overrides else []
    command = [*pinned(core), "nice", "-n", "10", sys.executable, "-m", "rlx", "train", "file", example,
               "--seed", str(seed), "--stop", json.dumps({"num_env_steps_sampled_lifetime": steps}),
               "--storage-path", str(storage), "--experiment-name", name, "--no-progress", "--no-checkpoint-at-end",
               *extra]
    metric = "game_score" if atari else "episode_return_mean"
    start = time.time()
    subprocess.run(command, check=True, cwd=ROOT, env=one_thread_env(core))
    wall = time.time() - start
    [trial] = sorted(p for p in (storage / name).iterdir() if p.is_dir())[-1:]
    xs, ys = [], []
    for line in (trial / "result.json").read_text().splitlines():
        result = json.loads(line)
        value = result.get("env_runners", {}).get(metric)
        if isinstance(value, (int, float)):
            xs.append(int(result["num_env_steps_sampled_lifetime"]))
            ys.append(float(value))
    return {"steps": xs, "return": ys, "wall_s": round(wall, 1)}


def anchors_python(explicit: str | None) -> str | None:
    """The anchors environment's interpreter, if there is one with rl_zoo3: `explicit` only when
    given (a wrong path is not replaced by another interpreter), else $ANCHORS_PYTHON or the
    anchors venv."""
    candidates = [explicit] if explicit else [os.environ.get("ANCHORS_PYTHON")]
    if not explicit and (ROOT.parent / "shared" / "anchors").exists():
        candidates.append(str(Path.home() / "anchors-venv" / "bin" / "python"))
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            check = subprocess.run([candidate, "-c", "import rl_zoo3"], capture_output=True)
            if check.returncode == 0:
                return candidate
    return None


ZOO_CONF_SCRIPT = """
import pathlib, sys, yaml, rl_zoo3
algo, env, out = sys.argv[1:]
table = yaml.safe_load((pathlib.Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml").read_text())
if env in table or ((env.startswith("ALE/") or "NoFrameskip" in env) and "atari" in table):
    print("")  # rl-zoo3 uses its `atari` entry for every ALE game
else:
    # rl-zoo3 2.x tunes MuJoCo's v4 envs; v5 (Gymnasium 1.x) has the same dynamics and spaces.
    older = env.rsplit("-v", 1)[0] + "-v4"
    if older not in table:
        sys.exit(f"rl-zoo3 has no {algo} hyperparameters for {env} (nor {older})")
    pathlib.Path(out).write_text(yaml.safe_dump({env: table[older]}))
    print(out)
"""


def zoo_conf_args(python: str, algo: str, env: str, folder: Path) -> list[str]:
    """`-conf FILE` giving rl-zoo3's hyperparameters of `env`'s v4 version when rl-zoo3 has none
    for `env` itself (it tunes HalfCheetah-v4, the rlx examples use v5); [] when it has them."""
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "zoo_hyperparams.yml"
    found = subprocess.run([python, "-c", ZOO_CONF_SCRIPT, algo, env, str(conf)], check=True,
                           capture_output=True, text=True).stdout.strip()
    return ["-conf", found] if found else []


def zoo_env_kwargs(env_config: dict) -> list[str]:
    """rl-zoo3's `--env-kwargs k:v ...` for the example's env_config, so both libraries make the
    same env (on ALE/...-v5: frameskip 1, as SB3's AtariWrapper skips frames itself)."""
    if not env_config:
        return []
    return ["--env-kwargs", *(f"{key}:{value!r}" for key, value in env_config.items())]


def monitor_curve(folder: Path, frames_per_step: int = 1) -> dict[str, list]:
    """The return curve in the Monitor files under `folder`: env steps (Monitor lengths /
    `frames_per_step`) against the mean return of the last SB3_WINDOW episodes."""
    episodes = []  # (seconds since start, return, length) of every sub-env's episodes
    for monitor in sorted(folder.rglob("*monitor.csv")):
        with monitor.open() as f:
            next(f)  # the Monitor's JSON header line
            episodes += [(float(row["t"]), float(row["r"]), int(row["l"])) for row in csv.DictReader(f)]
    episodes.sort()  # one Monitor file per sub-env: merge them in the order the episodes ended
    returns, lengths = [r for _, r, _ in episodes], [n for _, _, n in episodes]
    xs, ys, total = [], [], 0
    for i, length in enumerate(lengths):
        total += length / frames_per_step
        window = returns[max(0, i + 1 - SB3_WINDOW):i + 1]
        xs.append(round(total))
        ys.append(sum(window) / len(window))
    return {"steps": xs, "return": ys}


def sb3_curve(python: str, algo: str, env: str, steps: int, seed: int, out: Path, core: int | None = None,
              env_config: dict | None = None) -> dict:
    """rl-zoo3's tuned `algo` on `env` (made with `env_config`) for `steps` env steps (on `core`
    only, if given); its return curve and wall time. On Atari the Monitor sits below SB3's frame
    skip, so its episode lengths count frames: the curve's steps are those frames / 4."""
    frames_per_step = ATARI_FRAME_SKIP if is_atari_id(env) else 1
    folder = out / "sb3" / f"seed_{seed}"
    command = [*pinned(core), "nice", "-n", "10", python, "-m", "rl_zoo3.train", "--algo", algo.lower(), "--env", env,
               "-n", str(steps), "--seed", str(seed), "-f", str(folder), "--eval-freq", "-1",
               *zoo_conf_args(python, algo.lower(), env, folder), *zoo_env_kwargs(env_config or {})]
    start = time.time()
    subprocess.run(command, check=True, env=one_thread_env(core))
    wall = time.time() - start
    return {**monitor_curve(folder, frames_per_step), "wall_s": round(wall, 1)}


def summary(curves: dict[str, dict]) -> dict:
    """Final return (mean, std over seeds) and mean wall seconds of one library's curves."""
    finals = [c["return"][-1] for c in curves.values() if c["return"]]
    return {"final_return_mean": round(statistics.fmean(finals), 1) if finals else None,
            "final_return_std": round(statistics.pstdev(finals), 1) if finals else None,
            "wall_s_mean": round(statistics.fmean(c["wall_s"] for c in curves.values()), 1)}


def merged_report(folders: list[Path]) -> dict:
    """One report holding every seed of the reports in `folders` (their curves.json), which must
    be runs of the same example, algorithm, env and step budget with no seed of a library twice."""
    reports = []
    for folder in folders:
        path = folder / "curves.json"
        if not path.is_file():
            raise ValueError(f"{path} does not exist: give folders written by this script")
        reports.append(json.loads(path.read_text()))
    first = reports[0]
    for folder, report in zip(folders[1:], reports[1:]):
        for key in ("example", "env", "algo", "steps"):
            if report.get(key) != first.get(key):
                raise ValueError(f"{folder} has {key} {report.get(key)!r}, {folders[0]} has {first.get(key)!r}: "
                                 f"only runs of the same example and budget can be merged")
    # The rlx runs' config overrides (a variant of the example) must agree; SB3-only runs have none.
    with_rlx = [(folder, report) for folder, report in zip(folders, reports) if report.get("rlx")]
    for folder, report in with_rlx[1:]:
        if report.get("rlx_config") != with_rlx[0][1].get("rlx_config"):
            raise ValueError(f"{folder} ran rlx with --config {report.get('rlx_config')!r}, {with_rlx[0][0]} with "
                             f"{with_rlx[0][1].get('rlx_config')!r}: merge runs of one variant at a time")
    merged: dict = {key: first[key] for key in ("example", "env", "algo", "steps")}
    merged["rlx_config"] = with_rlx[0][1].get("rlx_config") if with_rlx else None
    merged["sources"] = [{"dir": str(folder), "loadavg": report.get("loadavg"),
                          "side_by_side": report.get("side_by_side"), "core": report.get("core")}
                         for folder, report in zip(folders, reports)]
    for lib in ("rlx", "sb3"):
        merged[lib] = {}
        for folder, report in zip(folders, reports):
            for seed, curve in report.get(lib, {}).items():
                if seed in merged[lib]:
                    raise ValueError(f"seed {seed} of {lib} is in more than one of {[str(f) for f in folders]}")
                merged[lib][seed] = curve
    return merged


def write_report(report: dict, out: Path) -> None:
    """Write `report` with its summary to OUT/curves.json, its curves to OUT/curves.csv and
    OUT/curves.png, and print the summary."""
    out.mkdir(parents=True, exist_ok=True)
    report["summary"] = {lib: summary(report[lib]) for lib in ("rlx", "sb3") if report[lib]}
    (out / "curves.json").write_text(json.dumps(report, indent=1))
    with (out / "curves.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["library", "seed", "env_steps", "return"])
        for lib in ("rlx", "sb3"):
            for seed, curve in report[lib].items():
                writer.writerows([lib, seed, x, y] for x, y in zip(curve["steps"], curve["return"]))
    if not plot_both(report, out / "curves.png"):
        print("curves.png not drawn: matplotlib is not installed (the plot extra)", file=sys.stderr)
    print(json.dumps({"out": str(out), **report["summary"]}))


def plot_both(report: dict, path: Path) -> bool:
    """Draw every seed's return curve of both libraries on one chart at `path`; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for lib, color in (("rlx", "tab:blue"), ("sb3", "tab:orange")):
        for i, (seed, curve) in enumerate(sorted(report[lib].items())):
            wall = curve["wall_s"]
            label = f"{'rlx' if lib == 'rlx' else 'SB3 + rl-zoo3'} seed {seed} ({wall / 60:.1f} min)"
            ax.plot(curve["steps"], curve["return"], color=color, alpha=1.0 if i == 0 else 0.6, label=label)
    atari = is_atari_id(report["env"])
    ax.set_xlabel("env steps (4 frames each)" if atari else "env steps")
    ax.set_ylabel("game score (mean of the last 10 games)" if atari else "episode return (smoothed)")
    ax.set_title(f"{report['algo']} on {report['env']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def usage_problem(args: argparse.Namespace, has_anchors: bool, cores: list[int]) -> str | None:
    """Why the run options `args` cannot run on this machine (`cores`: the usable cores; whether
    an anchors interpreter with rl_zoo3 exists), or None when they can."""
    if args.side_by_side and args.only:
        return f"--side-by-side runs both libraries, --only {args.only} one: give one of them"
    if args.side_by_side and args.core is not None:
        return "--side-by-side picks the two cores itself: drop --core"
    if (args.side_by_side or args.only == "sb3") and not has_anchors:
        option = "--side-by-side" if args.side_by_side else "--only sb3"
        return f"{option} needs the anchors interpreter with rl_zoo3 (--anchors-python)"
    if args.side_by_side and len(cores) < 2:
        return "--side-by-side needs two cores"
    if args.core is not None and args.core not in cores:
        return f"--core {args.core} is not one of this process's cores {cores}"
    return None


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run every seed of each library, and write the curves."""
    from rlx.cli.tuned_examples import resolve_experiment_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example", nargs="?")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default=None)
    parser.add_argument("--anchors-python", default=None)
    parser.add_argument("--replot", default=None, help="redraw DIR/curves.png from DIR/curves.json and exit")
    parser.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                        help="combine the curves.json of runs with different seeds into --out and exit")
    parser.add_argument("--side-by-side", action="store_true",
                        help="run the two libraries at once, each pinned to a core of its own with one thread")
    parser.add_argument("--only", choices=("rlx", "sb3"), default=None,
                        help="run one library only (combine the halves with --merge)")
    parser.add_argument("--config", default=None, metavar="JSON",
                        help="overrides of the example's config for the rlx runs (a variant to compare)")
    parser.add_argument("--core", type=int, default=None,
                        help="pin the run to this core with one thread (not with --side-by-side)")
    args = parser.parse_args(argv)
    if args.replot:
        folder = Path(args.replot)
        plot_both(json.loads((folder / "curves.json").read_text()), folder / "curves.png")
        return
    if args.merge:
        if args.out is None:
            parser.error("--merge needs --out DIR for the combined report")
        try:
            report = merged_report([Path(d) for d in args.merge])
        except ValueError as e:
            parser.error(str(e))
        write_report(report, Path(args.out))
        return
    if args.example is None or args.steps is None:
        parser.error("give EXAMPLE and --steps N (or --replot DIR)")
    import yaml

    example = resolve_experiment_path(args.example)
    [(name, spec)] = yaml.safe_load(Path(example).read_text()).items()
    python = anchors_python(args.anchors_python)
    problem = usage_problem(args, python is not None, sorted(os.sched_getaffinity(0)))
    if problem:
        parser.error(problem)
    try:
        rlx_config = json.loads(args.config) if args.config else None
    except json.JSONDecodeError as e:
        parser.error(f"--config is not JSON ({e}): give a JSON object such as '{{\"tau\": 0.01}}'")
    if rlx_config is not None and not isinstance(rlx_config, dict):
        parser.error(f"--config must be a JSON object of config keys, got {args.config}")
    out = Path(args.out or ROOT / "benchmarks" / "results" / name)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    atari = is_atari_id(spec["env"])
    env_config = spec.get("config", {}).get("env_config") or {}
    lr = budget_lr(spec, args.steps)
    report: dict = {"example": name, "env": spec["env"], "algo": spec["run"], "steps": args.steps,
                    "rlx_config": rlx_config,
                    "loadavg": os.getloadavg(), "side_by_side": args.side_by_side, "core": args.core,
                    "rlx": {}, "sb3": {}}
    if args.side_by_side:
        from concurrent.futures import ThreadPoolExecutor

        first, second = sorted(os.sched_getaffinity(0))[:2]
        with ThreadPoolExecutor(2) as pool:
            for seed in seeds:
                ours = pool.submit(rlx_curve, example, args.steps, seed, out, first, atari, lr, rlx_config)
                theirs = pool.submit(sb3_curve, python, spec["run"], spec["env"], args.steps, seed, out, second,
                                     env_config)
                report["rlx"][seed], report["sb3"][seed] = ours.result(), theirs.result()
    else:
        if args.only != "sb3":
            for seed in seeds:
                report["rlx"][seed] = rlx_curve(example, args.steps, seed, out, args.core, atari, lr, rlx_config)
        if python is not None and args.only != "rlx":
            for seed in seeds:
                report["sb3"][seed] = sb3_curve(python, spec["run"], spec["env"], args.steps, seed, out, args.core,
                                                env_config)
    write_report(report, out)
    if not report["rlx"]:
        return
    plot = subprocess.run([sys.executable, "-m", "rlx", "plot", str(out / "rlx"),
                           "--out", str(out / "rlx_curves.png")], capture_output=True, text=True)
    if plot.returncode != 0:
        print(f"rlx plot failed (the plot extra installs matplotlib): {plot.stderr.strip()}", file=sys.stderr)



if __name__ == "__main__":
    main()
