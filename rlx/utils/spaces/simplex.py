"""RLlib's Simplex space: points whose last-axis coordinates lie in [0, 1] and sum to 1."""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np


class Simplex(gym.Space):
    """A (d-1)-dimensional simplex in R^d, d = ``shape[-1]``; leading axes are independent
    simplices. Samples come from a Dirichlet distribution with ``concentration`` (default:
    all ones, i.e. uniform on the simplex)."""

    def __init__(self, shape: Sequence[int], concentration: Any = None, dtype: Any = np.float32):
        """Create the space; ``concentration`` has one positive entry per simplex coordinate."""
        if not isinstance(shape, (tuple, list)) or not shape:
            raise TypeError(f"Simplex shape must be a non-empty tuple or list, got {shape!r}.")
        super().__init__(tuple(shape), dtype)
        self.dim = self.shape[-1]
        if concentration is None:
            concentration = np.ones(self.dim)
        concentration = np.asarray(concentration, dtype=np.float64)
        if concentration.shape != (self.dim,):
            raise ValueError(f"Simplex concentration needs {self.dim} entries (shape[-1]), "
                             f"got shape {concentration.shape}.")
        self.concentration = concentration

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        """A point of the simplex (for every leading index), drawn from the Dirichlet."""
        return self.np_random.dirichlet(self.concentration, size=self.shape[:-1]).astype(self.dtype)

    def contains(self, x: Any) -> bool:
        """Whether x has the space's shape, lies in [0, 1] and sums to 1 along the last axis."""
        x = np.asarray(x)
        return (x.shape == self.shape and bool(np.all(x >= 0.0)) and bool(np.all(x <= 1.0))
                and bool(np.allclose(np.sum(x, axis=-1), 1.0, atol=1e-5)))

    def to_jsonable(self, sample_n: Any) -> list:
        """Samples as (nested) lists."""
        return np.asarray(sample_n).tolist()

    def from_jsonable(self, sample_n: Any) -> list:
        """Samples from :meth:`to_jsonable`'s lists."""
        return [np.asarray(sample, dtype=self.dtype) for sample in sample_n]

    def __repr__(self) -> str:
        return f"Simplex({self.shape}; {self.concentration})"

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Simplex) and self.shape == other.shape
                and np.allclose(self.concentration, other.concentration))
