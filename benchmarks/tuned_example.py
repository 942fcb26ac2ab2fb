"""Run a tuned example (tuned_examples/<algo>/<env>.yaml) until its stop criteria and report
wall seconds from process start, env steps, and whether the return criterion was met.

Usage: python benchmarks/tuned_example.py PATH.yaml [SEEDS=0]

The YAML has RLlib's experiment format: `name: {run, env, stop, config}`. Stop keys are
result keys, nested ones written `a/b` (e.g. `env_runners/episode_return_mean`); training
stops when any is reached, and the example counts as passed when its return key is.
Each seed runs in a fresh process so start-up is included.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from rlx.cli.stop import lookup

RETURN_KEYS = ("env_runners/episode_return_mean", "episode_reward_mean", "episode_return_mean")


def load_experiments(path: str) -> dict[str, dict]:
    """The experiments {name: spec} of a tuned-example YAML file."""
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{path} must map experiment names to {{run, env, stop, config}} dicts.")
    return data


def run_experiment(spec: dict, seed: int, t0: float) -> dict:
    """Build the experiment's algorithm and train it until a stop criterion is met."""
    from rlx.algorithms.registry import get_algorithm_config

    config = get_algorithm_config(spec.get("run") or spec["algo"])
    config.update_from_dict(dict(spec.get("config") or {}))
    config.environment(spec["env"]).debugging(seed=seed)
    stop = dict(spec.get("stop") or {})
    return_key = next((k for k in stop if k in RETURN_KEYS), None)
    algo = config.build()
    result: dict = {}
    while True:
        result = algo.train()
        if any((v := lookup(result, k)) is not None and v >= stop[k] for k in stop):
            break
    ret = lookup(result, return_key) if return_key else None
    passed = bool(return_key and ret is not None and ret >= stop[return_key])
    return {"seed": seed, "wall_s": round(time.time() - t0, 2), "steps": result["num_env_steps_sampled_lifetime"],
            "return": None if ret is None else round(float(ret), 1), "passed": passed}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        path, name, seed, t0 = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
        print(json.dumps(run_experiment(load_experiments(path)[name], seed, t0)))
        return
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    path = sys.argv[1]
    seeds = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "0").split(",")]
    for name in load_experiments(path):
        runs = []
        for seed in seeds:
            out = subprocess.run([sys.executable, __file__, "--child", path, name, str(seed), repr(time.time())],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                runs.append({"seed": seed, "error": out.stderr.strip().splitlines()[-1:]})
                continue
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps({"benchmark": "tuned_example", "file": path, "experiment": name,
                          "passed": f"{sum(bool(r.get('passed')) for r in runs)}/{len(runs)}", "runs": runs}))


if __name__ == "__main__":
    main()
