"""Sampling throughput of the EnvRunner on CartPole-v1 next to a plain Gymnasium loop.

Prints one JSON line per env count: steps/s of the plain loop (random actions, no
policy: the floor any sampler pays), of rlx's EnvRunner with PPO's default module, and
their ratio.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np


def plain_loop_rate(n_envs: int, seconds: float = 2.0) -> float:
    """Steps/s of a loop stepping n_envs CartPole envs with random actions."""
    envs = [gym.make("CartPole-v1") for _ in range(n_envs)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    acts = np.random.default_rng(0).integers(0, 2, size=100_000).tolist()
    k = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000 // n_envs + 1):
            for e in envs:
                _, _, term, trunc, _ = e.step(acts[k % 100_000])
                if term or trunc:
                    e.reset()
                k += 1
    return k / (time.perf_counter() - start)


def env_runner_rate(n_envs: int, seconds: float = 2.0, configure: Callable[[Any], Any] | None = None) -> float:
    """Steps/s of rlx's EnvRunner sampling with exploration (`configure` may change the PPOConfig)."""
    from rlx.algorithms.ppo import PPOConfig

    config = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=n_envs).debugging(seed=0)
    algo = (configure(config) if configure is not None else config).build()
    runner = algo.env_runner
    chunk = max(n_envs * 64, 1024)
    runner.sample(num_timesteps=chunk)
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = runner.sample(num_timesteps=chunk)
        steps += batch["rewards"].size
        runner.get_metrics()  # as train() does after every sample
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def main() -> None:
    import torch

    torch.set_num_threads(1)
    counts = [int(a) for a in sys.argv[1:]] or [1, 8, 64]
    for n in counts:
        plain = plain_loop_rate(n)
        rlx_rate = env_runner_rate(n)
        print(json.dumps({
            "benchmark": "sample_throughput", "env": "CartPole-v1", "num_envs": n,
            "plain_loop_steps_per_s": round(plain), "rlx_env_runner_steps_per_s": round(rlx_rate),
            "ratio_to_plain_loop": round(rlx_rate / plain, 3),
        }), flush=True)


if __name__ == "__main__":
    main()
