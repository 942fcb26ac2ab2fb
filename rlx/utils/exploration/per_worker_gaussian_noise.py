"""PerWorkerGaussianNoise: Ape-X style constant noise scale per env runner."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.utils.exploration.exploration import per_worker_value
from rlx.utils.exploration.gaussian_noise import GaussianNoise


class PerWorkerGaussianNoise(GaussianNoise):
    """GaussianNoise with a fixed scale per env runner.

    With `num_workers > 0`, remote runner i (1..N) uses the constant scale
    0.4 ** (1 + (i - 1) / (N - 1) * 7) (0.4 when N == 1) and the local runner (index 0)
    uses 0.0, overriding the scale schedule. With `num_workers == 0` it behaves like
    GaussianNoise.
    """

    def __init__(self, action_space: gym.Space, **kwargs: Any):
        num_workers = int(kwargs.get("num_workers", 0))
        if num_workers > 0:
            kwargs["scale_schedule"] = per_worker_value(num_workers, int(kwargs.get("worker_index", 0)))
        super().__init__(action_space, **kwargs)
