"""PPO on CartPole-v1: wall seconds from process start until the mean return of the last
100 episodes reaches TARGET, with rlx's default PPO settings.

Usage: python benchmarks/ppo_cartpole.py [TARGET=450] [BUDGET=300000] [SEEDS=0,1,2] [CONFIG_JSON]
Each seed runs in a fresh process so that start-up (imports, build) is included.
CONFIG_JSON optionally overrides training() settings, e.g. '{"lr": 0.001}'.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def run_one(target: float, budget: int, seed: int, overrides: dict) -> dict:
    """Train in this process (started by main) and return the figures."""
    t0 = float(sys.argv[-1])  # process start time handed over by the parent
    from rlx.algorithms.ppo import PPOConfig

    config = PPOConfig().environment("CartPole-v1").debugging(seed=seed)
    if overrides:
        config.training(**overrides)
    algo = config.build()
    built = time.time() - t0
    first = None
    ret, steps = float("nan"), 0
    while steps < budget:
        result = algo.train()
        if first is None:
            first = time.time() - t0
        ret = result["env_runners"]["episode_return_mean"]
        steps = result["num_env_steps_sampled_lifetime"]
        if ret >= target:
            break
    return {"seed": seed, "built_s": round(built, 2), "first_result_s": round(first, 2),
            "solve_s": round(time.time() - t0, 2), "steps": steps, "return": round(ret, 1), "solved": ret >= target}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        target, budget, seed, overrides = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
        print(json.dumps(run_one(target, budget, seed, overrides)))
        return
    target = float(sys.argv[1]) if len(sys.argv) > 1 else 450.0
    budget = int(sys.argv[2]) if len(sys.argv) > 2 else 300_000
    seeds = [int(s) for s in (sys.argv[3] if len(sys.argv) > 3 else "0,1,2").split(",")]
    overrides = sys.argv[4] if len(sys.argv) > 4 else "{}"
    runs = []
    for seed in seeds:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(target), str(budget), str(seed), overrides, repr(time.time())],
            capture_output=True, text=True, check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    solved = [r for r in runs if r["solved"]]
    print(json.dumps({
        "benchmark": "ppo_cartpole", "target": target, "budget": budget, "overrides": json.loads(overrides),
        "solved": f"{len(solved)}/{len(runs)}",
        "median_solve_s": statistics.median(r["solve_s"] for r in solved) if solved else None,
        "median_steps": statistics.median(r["steps"] for r in solved) if solved else None,
        "runs": runs,
    }))


if __name__ == "__main__":
    main()
