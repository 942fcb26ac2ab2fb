"""PPO learns CartPole with the library's default hyperparameters.

Only the environment and a seed are set: the defaults themselves must learn (PPOConfig's
docstring: "Defaults learn classic-control tasks without tuning"). The bar is the
quickstart's promise: CartPole-v1 solved (mean return of the last 100 episodes >= 450)
within 100k env steps.
"""
from __future__ import annotations

import math
import time

import pytest

from rlx.algorithms.ppo import PPOConfig

RETURN_THRESHOLD = 450.0
ENV_STEP_BUDGET = 100_000
WALL_CLOCK_LIMIT_S = 60.0




def test_ppo_defaults_solve_cartpole_within_100k_env_steps():
    algo = PPOConfig().environment("CartPole-v1").debugging(seed=1234).build()
    start = time.perf_counter()
    progress: list[tuple[int, float]] = []
    reached = False
    steps = 0
    while steps < ENV_STEP_BUDGET:
        result = algo.train()
        steps = result["num_env_steps_sampled_lifetime"]
        ret = result["env_runners"]["episode_return_mean"]
        progress.append((steps, round(ret, 1)))
        if steps <= ENV_STEP_BUDGET and not math.isnan(ret) and ret >= RETURN_THRESHOLD:
            reached = True
            break
        assert time.perf_counter() - start < WALL_CLOCK_LIMIT_S, f"training is too slow; progress: {progress}"
    algo.stop()
    assert reached, (
        f"episode_return_mean did not reach {RETURN_THRESHOLD} within {ENV_STEP_BUDGET} env steps; "
        f"progress (steps, return): {progress}"
    )
