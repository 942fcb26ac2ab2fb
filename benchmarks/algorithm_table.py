"""Every online algorithm's tuned example, timed to its pass criterion with 0 and 2 remote EnvRunners.

Usage: python benchmarks/algorithm_table.py [--seeds 0] [--runners 0 2] [--only PPO APPO ...]

For each online tuned example (tuned_examples/<algo>/*.yaml, offline ones left out) and each
runner count, `benchmarks/time_to_threshold.py` trains in a fresh process (start-up included)
until the example's return criterion or its env-step budget, with the example's config and
`num_env_runners` overridden (DD-PPO's workers are its runners, so 0 means PPO in the driver).
Prints one JSON line per run and then a markdown table (median over seeds) for
docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = {"BC", "MARWIL", "CQL"}
RETURN_KEY = "env_runners/episode_return_mean"


def examples() -> list[tuple[str, dict]]:
    """(relative path, experiment) of every online tuned example, in directory order."""
    out = []
    for path in sorted((ROOT / "tuned_examples").glob("*/*.yaml")):
        spec = next(iter(yaml.safe_load(path.read_text()).values()))
        if spec["run"].upper() not in OFFLINE:
            out.append((str(path.relative_to(ROOT / "tuned_examples")), spec))
    return out


def run(spec: dict, runners: int, seeds: str) -> dict:
    """time_to_threshold's summary for one example and runner count."""
    config = dict(spec.get("config") or {})
    config["num_env_runners"] = runners
    window = int(config.pop("metrics_num_episodes_for_smoothing", 100))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "time_to_threshold.py"), spec["run"], spec["env"],
           str(spec["stop"][RETURN_KEY]), str(spec["stop"]["num_env_steps_sampled_lifetime"]), seeds,
           json.dumps(config), str(window)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--runners", type=int, nargs="*", default=[0, 2])
    parser.add_argument("--only", nargs="*", default=None, help="algorithm names to run (default: all)")
    args = parser.parse_args()
    rows = []
    for relpath, spec in examples():
        if args.only and spec["run"].upper() not in {a.upper() for a in args.only}:
            continue
        cells = []
        for runners in args.runners:
            summary = run(spec, runners, args.seeds)
            print(json.dumps({"example": relpath, "num_env_runners": runners, **summary}), flush=True)
            if summary.get("median_solve_s") is None:
                cells.append(f"not reached ({summary.get('solved', 'error')})")
            else:
                cells.append(f"{summary['median_solve_s']:.1f} s / {int(summary['median_steps']):,} steps")
        target = spec["stop"][RETURN_KEY]
        rows.append(f"| {spec['run']} | {spec['env']} {target:g} | " + " | ".join(cells) + " |")
    header = "| algorithm | env, target | " + " | ".join(f"{r} remote runners" for r in args.runners) + " |"
    print("\n".join([header, "|" + " --- |" * (2 + len(args.runners))] + rows))


if __name__ == "__main__":
    main()
