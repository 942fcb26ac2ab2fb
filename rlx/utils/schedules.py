"""Piecewise-linear schedules given as [[timestep, value], ...] (or a constant)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class PiecewiseSchedule:
    """Value as a function of timestep: linear between points, constant after the last."""

    def __init__(self, points: Sequence[Sequence[float]] | float):
        if isinstance(points, (int, float)):
            points = [[0, float(points)]]
        self.timesteps = np.asarray([p[0] for p in points], dtype=np.float64)
        self.values = np.asarray([p[1] for p in points], dtype=np.float64)

    @property
    def is_constant(self) -> bool:
        """True when the schedule has a single value."""
        return len(self.values) == 1 or bool(np.all(self.values == self.values[0]))

    def value(self, timestep: float) -> float:
        """The scheduled value at `timestep`."""
        return float(np.interp(timestep, self.timesteps, self.values))

    __call__ = value
