"""Cost of writing sampled experiences (`output`) on CartPole-v1.

Samples with PPO's default config through `EnvRunnerGroup.sample()` (what every training
step calls, 4000 env steps a call) without output and with each output format, one call of
each in turn so machine load affects them alike, and prints one JSON line per format: env
steps per second with and without output, and their ratio. Rates are per second of this
process's CPU time (sampling and writing are both done by this process), which other
processes' load does not distort; the wall-clock rates are printed too. The requirement is a
ratio of at least 0.85 for the default JSON output (obs and new_obs compressed).

    python benchmarks/offline_writer.py [CALLS_PER_FORMAT]
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from typing import Any

FORMATS: dict[str, dict[str, Any]] = {
    "none": {},
    "json": {},
    "json_uncompressed": {"output_compress_columns": []},
    "parquet": {"output_config": {"format": "parquet"}},
}


def build(fmt: str, out_dir: str) -> Any:
    """A PPO on CartPole-v1 with rlx's defaults that writes its samples in `fmt` (or not at all)."""
    from rlx.algorithms.ppo import PPOConfig

    config = PPOConfig().environment("CartPole-v1").debugging(seed=0)
    if fmt != "none":
        config.offline_data(output=f"{out_dir}/{fmt}", **FORMATS[fmt])
    return config.build()


def timed_sample(algo: Any) -> tuple[int, float, float]:
    """(env steps, CPU seconds, wall seconds) of one train-batch-sized sample() call."""
    cpu, wall = time.process_time(), time.perf_counter()
    batch = algo.env_runner_group.sample(num_timesteps=algo.config.total_train_batch_size)
    return batch["rewards"].size, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    with tempfile.TemporaryDirectory() as out_dir:
        algos = {fmt: build(fmt, out_dir) for fmt in FORMATS}
        totals = {fmt: [0, 0.0, 0.0] for fmt in FORMATS}
        try:
            for algo in algos.values():
                timed_sample(algo)  # warm up: first files opened, caches filled
            for _ in range(calls):
                for fmt, algo in algos.items():
                    steps, cpu, wall = timed_sample(algo)
                    totals[fmt][0] += steps
                    totals[fmt][1] += cpu
                    totals[fmt][2] += wall
        finally:
            for algo in algos.values():
                algo.stop()
    base_steps, base_cpu, base_wall = totals["none"]
    for fmt in FORMATS:
        if fmt == "none":
            continue
        steps, cpu, wall = totals[fmt]
        print(json.dumps({
            "benchmark": "offline_writer", "env": "CartPole-v1", "format": fmt,
            "steps_per_cpu_s_without_output": round(base_steps / base_cpu),
            "steps_per_cpu_s_with_output": round(steps / cpu),
            "ratio": round((steps / cpu) / (base_steps / base_cpu), 3),
            "wall_ratio": round((steps / wall) / (base_steps / base_wall), 3),
            "calls": calls,
        }), flush=True)


if __name__ == "__main__":
    main()
