"""Cost of the default result loggers (result.json, progress.csv, TensorBoard) per train()
call, as a ratio to the same training with NoopLogger; plus the `rlx` command's start-up.

Usage: python benchmarks/logging_overhead.py [ITERATIONS=60]

Prints one JSON object per case: seconds per iteration with each logger (the best of
three alternating rounds) and their ratio. Start-up figures are wall seconds of `rlx --help`, `rlx list`, and of a one-
iteration `rlx train`, next to `python -c pass` (the floor) measured in the same run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "PPO batch 256": ("PPO", "CartPole-v1", {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1}),
    "PPO defaults": ("PPO", "CartPole-v1", {}),
    "DQN defaults": ("DQN", "CartPole-v1", {}),
}


def seconds_per_iteration(algo_name: str, env: str, overrides: dict, logger_type: str | None, iterations: int) -> float:
    """Mean seconds of `iterations` train() calls after two warm-up calls."""
    from rlx.algorithms.registry import get_algorithm_config

    config = get_algorithm_config(algo_name).update_from_dict(dict(overrides)).environment(env).debugging(seed=0)
    if logger_type is not None:
        config.debugging(logger_config={"type": logger_type})
    algo = config.build()
    for _ in range(2):
        algo.train()
    start = time.perf_counter()
    for _ in range(iterations):
        algo.train()
    elapsed = time.perf_counter() - start
    algo.stop()
    return elapsed / iterations


def wall(cmd: list[str], env: dict) -> float:
    """Wall seconds of one run of `cmd`."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RLX_RESULTS_DIR"] = tmp
        for name, (algo, env, overrides) in CASES.items():
            # Alternate the two, three rounds each, and keep each one's best: the machine's
            # noise (10-15 %) is larger than the loggers' cost on big iterations.
            noop, default = float("inf"), float("inf")
            for _ in range(3):
                noop = min(noop, seconds_per_iteration(algo, env, overrides, "rlx.loggers.NoopLogger", iterations))
                default = min(default, seconds_per_iteration(algo, env, overrides, None, iterations))
            print(json.dumps({"case": name, "iterations": iterations, "noop_s_per_iter": round(noop, 5),
                              "default_loggers_s_per_iter": round(default, 5),
                              "ratio_default_to_noop": round(default / noop, 3)}))
        rlx = str(Path(sys.executable).parent / "rlx")
        env = dict(os.environ)
        floor = min(wall([sys.executable, "-c", "pass"], env) for _ in range(3))
        figures = {"python_floor_s": round(floor, 3)}
        for label, args in (("rlx_help_s", ["--help"]), ("rlx_list_s", ["list"]),
                            ("rlx_train_1_iter_s", ["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop",
                                                    '{"training_iteration": 1}', "--no-checkpoint-at-end"])):
            figures[label] = round(min(wall([rlx, *args], env) for _ in range(3)), 3)
        print(json.dumps({"case": "command start-up", **figures}))


if __name__ == "__main__":
    main()
