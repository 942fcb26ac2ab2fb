"""Observation filters: NoFilter and MeanStdFilter (running mean/std normalization)."""
from __future__ import annotations

from typing import Any

import numpy as np


class NoFilter:
    """Passes observations through unchanged."""

    is_identity = True

    def __init__(self, shape: tuple[int, ...] = ()):
        self.shape = tuple(shape)

    def __call__(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        return x

    def apply_batch(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        """Filter a batch [N, *shape]."""
        return x

    def get_state(self) -> dict[str, Any]:
        """Serializable state."""
        return {"type": "NoFilter"}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state()."""


class MeanStdFilter:
    """Normalizes observations by a running mean and standard deviation, clipped to +-clip.

    Statistics are updated with every observation seen while `update=True` (Chan et al.'s
    parallel variance update, so batch and one-at-a-time updates agree).
    """

    is_identity = False

    def __init__(self, shape: tuple[int, ...], demean: bool = True, destd: bool = True, clip: float | None = 10.0):
        self.shape = tuple(shape)
        self.demean = demean
        self.destd = destd
        self.clip = clip
        self.count = 0
        self.mean = np.zeros(self.shape, dtype=np.float64)
        self.m2 = np.zeros(self.shape, dtype=np.float64)

    @property
    def std(self) -> np.ndarray:
        """Current standard deviation (1 until two observations were seen)."""
        if self.count < 2:
            return np.ones(self.shape, dtype=np.float64)
        return np.sqrt(self.m2 / (self.count - 1))

    def update(self, batch: np.ndarray) -> None:
        """Fold a batch [N, *shape] into the running statistics."""
        n = batch.shape[0]
        if n == 0:
            return
        b_mean = batch.mean(axis=0, dtype=np.float64)
        b_m2 = ((batch - b_mean) ** 2).sum(axis=0, dtype=np.float64)
        total = self.count + n
        delta = b_mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + b_m2 + delta**2 * (self.count * n / total)
        self.count = total

    def apply_batch(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        """Update with (if `update`) and normalize a batch [N, *shape]."""
        if update:
            self.update(x)
        out = x
        if self.demean:
            out = out - self.mean
        if self.destd:
            out = out / (self.std + 1e-8)
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
        return out.astype(np.float32, copy=False)

    def __call__(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        return self.apply_batch(x[None], update=update)[0]

    def get_state(self) -> dict[str, Any]:
        """Serializable state (plain lists and numbers)."""
        return {
            "type": "MeanStdFilter",
            "shape": list(self.shape),
            "count": int(self.count),
            "mean": self.mean.tolist(),
            "m2": self.m2.tolist(),
            "demean": self.demean,
            "destd": self.destd,
            "clip": self.clip,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state()."""
        if tuple(state["shape"]) != self.shape:
            raise ValueError(f"MeanStdFilter state has shape {state['shape']}, expected {list(self.shape)}.")
        self.count = int(state["count"])
        self.mean = np.asarray(state["mean"], dtype=np.float64).reshape(self.shape)
        self.m2 = np.asarray(state["m2"], dtype=np.float64).reshape(self.shape)


def make_filter(name: str, shape: tuple[int, ...]) -> NoFilter | MeanStdFilter:
    """Build the filter named by config `observation_filter`."""
    if name == "NoFilter":
        return NoFilter(shape)
    if name in ("MeanStdFilter", "ConcurrentMeanStdFilter"):
        return MeanStdFilter(shape)
    raise ValueError(f"Unknown observation_filter {name!r}; use 'NoFilter' or 'MeanStdFilter'.")
