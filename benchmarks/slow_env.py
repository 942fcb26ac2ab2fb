"""SlowCartPole: CartPole-v1 whose step() also burns a fixed amount of CPU time, to stand
for envs that cost more than the policy (physics simulators, games). Used by
scale_out.py; lives in its own module so worker processes can import it."""
from __future__ import annotations

import time

import gymnasium as gym


class SlowCartPole(gym.Wrapper):
    """CartPole-v1 with `step_cost_ms` (env_config, default 0.5) of busy CPU work per step."""

    def __init__(self, config=None):
        config = config if config is not None else {}
        super().__init__(gym.make("CartPole-v1"))
        self.step_cost_s = float(config.get("step_cost_ms", 0.5)) / 1000.0

    def step(self, action):
        end = time.perf_counter() + self.step_cost_s
        while time.perf_counter() < end:  # busy work, as a simulator would do
            pass
        return self.env.step(action)
