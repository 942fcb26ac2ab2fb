"""Train a tuned example for an env-step budget over several seeds and write its return curves,
beside Stable-Baselines3 + rl-zoo3 at the same budget when an anchors environment is present.

Usage:
    python benchmarks/learning_curves.py EXAMPLE --steps N [--seeds 0,1,2] [--out DIR]
                                         [--anchors-python PATH]

EXAMPLE is a tuned example's path or name (e.g. tuned_examples/sac/halfcheetah-sac.yaml or
halfcheetah-sac). Each rlx seed runs `rlx train file EXAMPLE --seed S` in a fresh process with
the stop criterion replaced by `num_env_steps_sampled_lifetime >= N` (start-up included in the
wall time), under `nice -n 10`. Written to DIR (default benchmarks/results/<example>):

- `curves.json`: {"rlx": {seed: {"steps": [...], "return": [...], "wall_s": s}}, "sb3": ...}
  and a summary: final return (mean +- std over seeds) and mean wall time per library;
- `curves.csv`: library, seed, env steps, return (one row per iteration / episode);
- `rlx_curves.png`: `rlx plot` of the rlx trials (needs the `plot` extra).

Stable-Baselines3 runs when an anchors interpreter is given (`--anchors-python`, or
$ANCHORS_PYTHON, or ~/anchors-venv/bin/python when ../shared/anchors exists) and has rl_zoo3:
`python -m rl_zoo3.train --algo ALGO --env ENV -n N --seed S` with rl-zoo3's own hyperparameters
for the env; its returns come from the Monitor files rl-zoo3 writes (mean of the last 10
episodes, as the rlx MuJoCo examples smooth over 5-10).
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
RETURN_KEY = "env_runners/episode_return_mean"
SB3_WINDOW = 10


def rlx_curve(example: str, steps: int, seed: int, out: Path) -> dict:
    """Train `example` with `seed` for `steps` env steps through the CLI; its return curve and wall time."""
    storage = out / "rlx"
    name = f"seed_{seed}"
    command = ["nice", "-n", "10", sys.executable, "-m", "rlx", "train", "file", example,
               "--seed", str(seed), "--stop", json.dumps({"num_env_steps_sampled_lifetime": steps}),
               "--storage-path", str(storage), "--experiment-name", name, "--no-progress", "--no-checkpoint-at-end"]
    start = time.time()
    subprocess.run(command, check=True, cwd=ROOT)
    wall = time.time() - start
    [trial] = sorted(p for p in (storage / name).iterdir() if p.is_dir())[-1:]
    xs, ys = [], []
    for line in (trial / "result.json").read_text().splitlines():
        result = json.loads(line)
        value = result.get("env_runners", {}).get("episode_return_mean")
        if isinstance(value, (int, float)):
            xs.append(int(result["num_env_steps_sampled_lifetime"]))
            ys.append(float(value))
    return {"steps": xs, "return": ys, "wall_s": round(wall, 1)}


def anchors_python(explicit: str | None) -> str | None:
    """The anchors environment's interpreter, if there is one with rl_zoo3."""
    candidates = [explicit, os.environ.get("ANCHORS_PYTHON")]
    if (ROOT.parent / "shared" / "anchors").exists():
        candidates.append(str(Path.home() / "anchors-venv" / "bin" / "python"))
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            check = subprocess.run([candidate, "-c", "import rl_zoo3"], capture_output=True)
            if check.returncode == 0:
                return candidate
    return None


def sb3_curve(python: str, algo: str, env: str, steps: int, seed: int, out: Path) -> dict:
    """rl-zoo3's tuned `algo` on `env` for `steps` env steps; its return curve and wall time."""
    folder = out / "sb3" / f"seed_{seed}"
    command = ["nice", "-n", "10", python, "-m", "rl_zoo3.train", "--algo", algo.lower(), "--env", env,
               "-n", str(steps), "--seed", str(seed), "-f", str(folder), "--eval-freq", "-1"]
    start = time.time()
    subprocess.run(command, check=True)
    wall = time.time() - start
    returns, lengths = [], []
    for monitor in sorted(folder.rglob("*monitor.csv")):
        with monitor.open() as f:
            next(f)  # the Monitor's JSON header line
            for row in csv.DictReader(f):
                returns.append(float(row["r"]))
                lengths.append(int(row["l"]))
    xs, ys, total = [], [], 0
    for i, length in enumerate(lengths):
        total += length
        window = returns[max(0, i + 1 - SB3_WINDOW):i + 1]
        xs.append(total)
        ys.append(sum(window) / len(window))
    return {"steps": xs, "return": ys, "wall_s": round(wall, 1)}


def summary(curves: dict[str, dict]) -> dict:
    """Final return (mean, std over seeds) and mean wall seconds of one library's curves."""
    finals = [c["return"][-1] for c in curves.values() if c["return"]]
    return {"final_return_mean": round(statistics.fmean(finals), 1) if finals else None,
            "final_return_std": round(statistics.pstdev(finals), 1) if finals else None,
            "wall_s_mean": round(statistics.fmean(c["wall_s"] for c in curves.values()), 1)}


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run every seed of each library, and write the curves."""
    from rlx.cli.tuned_examples import resolve_experiment_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default=None)
    parser.add_argument("--anchors-python", default=None)
    args = parser.parse_args(argv)
    import yaml

    example = resolve_experiment_path(args.example)
    [(name, spec)] = yaml.safe_load(Path(example).read_text()).items()
    out = Path(args.out or ROOT / "benchmarks" / "results" / name)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    report: dict = {"example": name, "env": spec["env"], "algo": spec["run"], "steps": args.steps,
                    "loadavg": os.getloadavg(), "rlx": {}, "sb3": {}}
    for seed in seeds:
        report["rlx"][seed] = rlx_curve(example, args.steps, seed, out)
    python = anchors_python(args.anchors_python)
    if python is not None:
        for seed in seeds:
            report["sb3"][seed] = sb3_curve(python, spec["run"], spec["env"], args.steps, seed, out)
    report["summary"] = {lib: summary(report[lib]) for lib in ("rlx", "sb3") if report[lib]}
    (out / "curves.json").write_text(json.dumps(report, indent=1))
    with (out / "curves.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["library", "seed", "env_steps", "return"])
        for lib in ("rlx", "sb3"):
            for seed, curve in report[lib].items():
                writer.writerows([lib, seed, x, y] for x, y in zip(curve["steps"], curve["return"]))
    plot = subprocess.run([sys.executable, "-m", "rlx", "plot", str(out / "rlx"),
                           "--out", str(out / "rlx_curves.png")], capture_output=True, text=True)
    if plot.returncode != 0:
        print(f"rlx plot failed (the plot extra installs matplotlib): {plot.stderr.strip()}", file=sys.stderr)
    print(json.dumps({"out": str(out), **report["summary"]}))


if __name__ == "__main__":
    main()
