"""PerWorkerEpsilonGreedy: Ape-X style constant epsilon per env runner."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlx.utils.exploration.epsilon_greedy import EpsilonGreedy
from rlx.utils.exploration.exploration import per_worker_value


class PerWorkerEpsilonGreedy(EpsilonGreedy):
    """EpsilonGreedy with a fixed epsilon per env runner, as in Ape-X.

    With `num_workers > 0`, remote runner i (1..N) uses the constant epsilon
    0.4 ** (1 + (i - 1) / (N - 1) * 7) (0.4 when N == 1) and the local runner (index 0)
    uses 0.0, overriding the epsilon schedule. With `num_workers == 0` it behaves like
    EpsilonGreedy.
    """

    def __init__(self, action_space: gym.Space, **kwargs: Any):
        num_workers = int(kwargs.get("num_workers", 0))
        if num_workers > 0:
            kwargs["epsilon_schedule"] = per_worker_value(num_workers, int(kwargs.get("worker_index", 0)))
        super().__init__(action_space, **kwargs)
