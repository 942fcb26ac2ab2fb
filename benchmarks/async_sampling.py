"""Wall seconds to CartPole-v1 450 with 2 remote EnvRunners: PPO (synchronous sampling) against
IMPALA and APPO (asynchronous sampling) with their tuned examples' settings.

Usage: python benchmarks/async_sampling.py [SEEDS=0,1,2] [TARGET=450] [BUDGET=500000]

Every run is a fresh process (start-up included: `time_to_threshold.py --child`), and the runs
are interleaved per seed (PPO, IMPALA, APPO, then the next seed) so that the load of a shared
machine falls on all three alike. Prints one JSON line per algorithm (solved runs, median
seconds from process start, median env steps, the runs) and a last line with the ratios of
IMPALA's and APPO's median to PPO's.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
THRESHOLD_SCRIPT = Path(__file__).resolve().parent / "time_to_threshold.py"
RUNNERS = {"num_env_runners": 2}


def settings() -> dict[str, dict]:
    """{algorithm: config overrides}: PPO's defaults with 2 runners, the tuned examples' configs."""
    out = {"PPO": dict(RUNNERS)}
    for algo in ("impala", "appo"):
        spec = next(iter(yaml.safe_load((ROOT / "tuned_examples" / algo / f"cartpole-{algo}.yaml").read_text())
                         .values()))
        config = {k: v for k, v in spec["config"].items() if k != "framework"}
        assert config.get("num_env_runners") == 2, f"{algo}'s tuned example must use 2 remote runners"
        out[spec["run"]] = config
    return out


def run(algo: str, overrides: dict, seed: int, target: float, budget: int) -> dict:
    """One run in a fresh process; the figures time_to_threshold.py reports."""
    cmd = [sys.executable, str(THRESHOLD_SCRIPT), "--child", algo, "CartPole-v1", str(target), str(budget), str(seed),
           json.dumps(overrides), "100", repr(time.time())]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"seed": seed, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    seeds = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "0,1,2").split(",")]
    target = float(sys.argv[2]) if len(sys.argv) > 2 else 450.0
    budget = int(sys.argv[3]) if len(sys.argv) > 3 else 500_000
    algos = settings()
    runs: dict[str, list[dict]] = {name: [] for name in algos}
    for seed in seeds:
        for name, overrides in algos.items():
            runs[name].append(run(name, overrides, seed, target, budget))
    medians = {}
    for name, results in runs.items():
        solved = [r for r in results if r.get("solved")]
        medians[name] = statistics.median(r["solve_s"] for r in solved) if solved else None
        print(json.dumps({"benchmark": "async_sampling", "algo": name, "target": target, "overrides": algos[name],
                          "solved": f"{len(solved)}/{len(results)}", "median_solve_s": medians[name],
                          "median_steps": statistics.median(r["steps"] for r in solved) if solved else None,
                          "runs": results}))
    base = medians["PPO"]
    print(json.dumps({"benchmark": "async_sampling", "ratio_to_ppo": {
        name: round(m / base, 2) if m and base else None for name, m in medians.items() if name != "PPO"}}))


if __name__ == "__main__":
    main()
