"""Does training reach the same returns with the Learner on a GPU? PPO and SAC, CPU vs CUDA.

Usage: python benchmarks/gpu_learning.py [--seeds 0 1] [--variants cpu cuda cuda_bf16]

- PPO on CartPole-v1 (rlx's defaults) until the mean return reaches 450 (at most 40 iterations).
- SAC on Pendulum-v1 ([256, 256], batch 256) until the mean return reaches -250 (at most 8k steps).

One JSON line per algorithm, variant and seed: wall seconds, env steps and the return reached.
The EnvRunners act on the CPU in every variant; `cuda` moves the Learner with
`num_gpus_per_learner=1`, `cuda_bf16` adds `mixed_precision="bf16"`. Without a GPU only the
`cpu` variant runs.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

VARIANTS: dict[str, Callable[[Any], Any]] = {
    "cpu": lambda config: config,
    "cuda": lambda config: config.learners(num_gpus_per_learner=1),
    "cuda_bf16": lambda config: config.learners(num_gpus_per_learner=1, mixed_precision="bf16"),
}


def _ppo(seed: int) -> Any:
    from rlx.algorithms.ppo import PPOConfig

    return PPOConfig().environment("CartPole-v1").debugging(seed=seed)


def _sac(seed: int) -> Any:
    from rlx.algorithms.sac import SACConfig

    net = {"fcnet_hiddens": [256, 256]}
    return (SACConfig().environment("Pendulum-v1")
            .training(q_model_config=net, policy_model_config=net, train_batch_size=256)
            .reporting(min_sample_timesteps_per_iteration=500).debugging(seed=seed))


RUNS = {"PPO": (_ppo, 450.0, 40, None), "SAC": (_sac, -250.0, 100, 8000)}


def _run(make: Callable[[int], Any], variant: str, seed: int, threshold: float, max_iters: int,
         max_steps: int | None) -> dict[str, Any]:
    algo = VARIANTS[variant](make(seed)).build()
    start = time.perf_counter()
    ret, steps = float("-inf"), 0
    try:
        for _ in range(max_iters):
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            steps = result["num_env_steps_sampled_lifetime"]
            if ret >= threshold or (max_steps is not None and steps >= max_steps):
                break
    finally:
        algo.stop()
    return {"seconds": round(time.perf_counter() - start, 1), "env_steps": int(steps), "return": round(ret, 1),
            "reached": bool(ret >= threshold)}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--algos", nargs="*", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    variants = [v for v in args.variants if v == "cpu" or torch.cuda.is_available()]
    for algo in args.algos:
        make, threshold, max_iters, max_steps = RUNS[algo]
        for variant in variants:
            for seed in args.seeds:
                figures = _run(make, variant, seed, threshold, max_iters, max_steps)
                print(json.dumps({"algo": algo, "variant": variant, "seed": seed, "threshold": threshold, **figures}),
                      flush=True)


if __name__ == "__main__":
    main()
