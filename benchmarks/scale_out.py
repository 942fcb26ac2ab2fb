"""Remote EnvRunners: sampling throughput, PPO wall time and start-up cost with 0, 1 and
2 remote runners on each backend, next to the local runner.

Usage: python benchmarks/scale_out.py [STEP_COST_MS=0.5] [BACKENDS=process,ray]

Prints one JSON line per case:
- "sample": env steps/s of EnvRunnerGroup.sample() on CartPole-v1 and on SlowCartPole
  (CartPole plus STEP_COST_MS of CPU work per step), and the ratio to 0 remote runners;
- "startup": seconds to build PPO with that many runners (processes start, import torch,
  build their envs and modules);
- "ppo_cartpole": seconds of training (after the build), env steps and microseconds per
  env step until PPO's mean return reaches 450 on CartPole-v1, budget 200k steps, seed 0
  (remote runners seed their envs by worker index, so the step counts differ by luck:
  compare us_per_step).
The Ray backend is measured only when Ray is installed.
"""
from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from slow_env import SlowCartPole  # noqa: E402

RUNNER_COUNTS = (0, 1, 2)


def build(backend: str, runners: int, env, env_config: dict | None = None, **training):
    """PPO with `runners` remote EnvRunners on `backend`; returns (algo, build seconds)."""
    from rlx.algorithms.ppo import PPOConfig

    config = (PPOConfig().environment(env, env_config=env_config or {})
              .env_runners(num_env_runners=runners, env_runner_backend=backend)
              .training(**training).debugging(seed=0, logger_config={"type": "rlx.loggers.NoopLogger"}))
    start = time.perf_counter()
    algo = config.build()
    return algo, time.perf_counter() - start


def sample_rate(algo, seconds: float = 3.0, chunk: int = 2000) -> float:
    """Env steps/s of the group's sample() (with get_metrics, as train() calls it)."""
    group = algo.env_runner_group
    group.sample(num_timesteps=chunk)
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = group.sample(num_timesteps=chunk)
        steps += int(batch["valid"].sum()) if "valid" in batch else batch["rewards"].size
        group.get_metrics()
    return steps / (time.perf_counter() - start)


def ppo_to_450(algo, budget: int = 200_000) -> dict:
    """Train until the mean return reaches 450 or the budget is spent."""
    start = time.perf_counter()
    result = {}
    while True:
        result = algo.train()
        ret = result["env_runners"]["episode_return_mean"]
        if ret >= 450 or result["num_env_steps_sampled_lifetime"] >= budget:
            break
    train_s = time.perf_counter() - start
    return {"train_s": round(train_s, 2), "steps": result["num_env_steps_sampled_lifetime"],
            "us_per_step": round(1e6 * train_s / result["num_env_steps_sampled_lifetime"], 1),
            "return": round(float(ret), 1), "reached": bool(ret >= 450)}


def main() -> None:
    step_cost = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
    backends = (sys.argv[2] if len(sys.argv) > 2 else "process,ray").split(",")
    if "ray" in backends:
        try:
            import ray  # noqa: F401
        except ImportError:
            backends.remove("ray")
    envs = {"CartPole-v1": ("CartPole-v1", None), f"SlowCartPole({step_cost}ms)": (SlowCartPole,
                                                                                   {"step_cost_ms": step_cost})}
    for backend in backends:
        if backend == "ray":
            # Started only now: Ray's own processes take CPU time from whatever runs beside them.
            import ray

            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        for env_name, (env, env_config) in envs.items():
            base = None
            for runners in RUNNER_COUNTS:
                algo, build_s = build(backend, runners, env, env_config)
                rate = sample_rate(algo)
                algo.stop()
                base = base or rate
                print(json.dumps({"case": "sample", "backend": backend, "env": env_name, "remote_runners": runners,
                                  "steps_per_s": round(rate), "ratio_to_0_runners": round(rate / base, 2),
                                  "build_s": round(build_s, 2)}), flush=True)
        for runners in RUNNER_COUNTS:
            algo, build_s = build(backend, runners, "CartPole-v1")
            outcome = ppo_to_450(algo)
            algo.stop()
            print(json.dumps({"case": "ppo_cartpole", "backend": backend, "remote_runners": runners,
                              "build_s": round(build_s, 2), **outcome}), flush=True)


if __name__ == "__main__":
    main()
