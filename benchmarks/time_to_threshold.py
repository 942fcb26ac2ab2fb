"""Any registered algorithm on any env: wall seconds from process start (and env steps) until
the smoothed episode return reaches TARGET.

Usage:
    python benchmarks/time_to_threshold.py ALGO ENV TARGET BUDGET [SEEDS=0,1,2] [CONFIG_JSON] [WINDOW]

CONFIG_JSON overrides settings as a flat config dict (e.g. '{"lr": 0.001, "n_step": 3}').
WINDOW sets metrics_num_episodes_for_smoothing (default 100, rlx's and RLlib's default);
the Stable-Baselines3 SAC anchor stops on the mean of its last 5 episodes, so compare it
with WINDOW=5. Each seed runs in a fresh process so start-up (imports, build) is included.
Besides the solve time, each run reports learner updates per second (replayed train
batches over the seconds spent in train()).
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def run_one(algo_name: str, env: str, target: float, budget: int, seed: int, overrides: dict, window: int,
            t0: float) -> dict:
    """Train in this process and return the figures."""
    from rlx.algorithms.registry import get_algorithm_config

    config = get_algorithm_config(algo_name).environment(env).debugging(seed=seed)
    config.reporting(metrics_num_episodes_for_smoothing=window)
    if overrides:
        config.update_from_dict(overrides)
    algo = config.build()
    built = time.time() - t0
    ret, steps, updates, train_s = float("nan"), 0, 0, 0.0
    batch = config.total_train_batch_size
    while steps < budget:
        t = time.time()
        result = algo.train()
        train_s += time.time() - t
        ret = result["env_runners"]["episode_return_mean"]
        steps = result["num_env_steps_sampled_lifetime"]
        updates = result["num_env_steps_trained_lifetime"] // batch
        if ret >= target:
            break
    return {"seed": seed, "built_s": round(built, 2), "solve_s": round(time.time() - t0, 2), "steps": steps,
            "return": round(ret, 1), "solved": bool(ret >= target), "updates": updates,
            "updates_per_s": round(updates / train_s, 1) if train_s else None,
            "env_steps_per_s": round(steps / train_s, 1) if train_s else None}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        algo_name, env, target, budget, seed, overrides, window, t0 = sys.argv[2:10]
        print(json.dumps(run_one(algo_name, env, float(target), int(budget), int(seed), json.loads(overrides),
                                 int(window), float(t0))))
        return
    if len(sys.argv) < 5:
        print(__doc__)
        sys.exit(2)
    algo_name, env, target, budget = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    seeds = [int(s) for s in (sys.argv[5] if len(sys.argv) > 5 else "0,1,2").split(",")]
    overrides = sys.argv[6] if len(sys.argv) > 6 else "{}"
    window = int(sys.argv[7]) if len(sys.argv) > 7 else 100
    runs = []
    for seed in seeds:
        out = subprocess.run(
            [sys.executable, __file__, "--child", algo_name, env, str(target), str(budget), str(seed), overrides,
             str(window), repr(time.time())],
            capture_output=True, text=True,
        )
        if out.returncode != 0:
            runs.append({"seed": seed, "error": out.stderr.strip().splitlines()[-1:]})
            continue
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    solved = [r for r in runs if r.get("solved")]
    print(json.dumps({
        "benchmark": "time_to_threshold", "algo": algo_name, "env": env, "target": target, "budget": budget,
        "window": window, "overrides": json.loads(overrides), "solved": f"{len(solved)}/{len(runs)}",
        "median_solve_s": statistics.median(r["solve_s"] for r in solved) if solved else None,
        "median_steps": statistics.median(r["steps"] for r in solved) if solved else None,
        "runs": runs,
    }))


if __name__ == "__main__":
    main()
