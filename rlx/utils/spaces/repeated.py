"""RLlib's Repeated space: a list of between 0 and ``max_len`` elements of one child space."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Repeated(gym.Space):
    """A variable-length list of elements of ``child_space``, at most ``max_len`` long
    (e.g. the objects an agent currently sees)."""

    def __init__(self, child_space: gym.Space, max_len: int):
        """Create the space of lists of up to ``max_len`` elements of ``child_space``."""
        if not isinstance(child_space, gym.Space):
            raise TypeError(f"Repeated needs a gymnasium space as child_space, got {child_space!r}.")
        if isinstance(max_len, bool) or not isinstance(max_len, (int, np.integer)) or max_len < 1:
            raise ValueError(f"Repeated max_len must be a positive int, got {max_len!r}.")
        super().__init__()
        self.child_space = child_space
        self.max_len = int(max_len)

    def sample(self, mask: Any = None, probability: Any = None) -> list:
        """A list of 1 to max_len child samples."""
        length = int(self.np_random.integers(1, self.max_len + 1))
        return [self.child_space.sample() for _ in range(length)]

    def contains(self, x: Any) -> bool:
        """Whether x is a list (or array) of at most max_len elements of the child space."""
        return (isinstance(x, (list, np.ndarray)) and len(x) <= self.max_len
                and all(self.child_space.contains(item) for item in x))

    def seed(self, seed: Any = None) -> list:
        """Seed this space and its child space."""
        seeds = super().seed(seed)
        self.child_space.seed(seed)
        return seeds

    def __repr__(self) -> str:
        return f"Repeated({self.child_space}, {self.max_len})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Repeated) and self.child_space == other.child_space and self.max_len == other.max_len
