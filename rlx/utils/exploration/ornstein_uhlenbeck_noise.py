"""OrnsteinUhlenbeckNoise: deterministic action plus temporally correlated OU noise."""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from rlx.utils.exploration.exploration import check_options
from rlx.utils.exploration.gaussian_noise import GaussianNoise


class OrnsteinUhlenbeckNoise(GaussianNoise):
    """GaussianNoise whose noise is an Ornstein-Uhlenbeck process per batch row.

    Each exploring step (after the random phase) updates the state
    `state += ou_theta * (-state) + ou_sigma * N(0, 1)` and adds
    `ou_base_scale * state * scale(t) * (high - low)` to the deterministic action
    (range 2.0 where a bound is infinite), clipped to the bounds. The state has shape
    [B, *action_shape]; it starts at zeros and is reset when B changes. It is part of
    get_state/set_state.
    """

    fixed_kwargs = ("stddev",)

    def __init__(
        self,
        action_space: gym.Space,
        *,
        ou_theta: float = 0.15,
        ou_sigma: float = 0.2,
        ou_base_scale: float = 0.1,
        random_timesteps: int = 1000,
        initial_scale: float = 1.0,
        final_scale: float = 0.02,
        scale_timesteps: int = 10000,
        scale_schedule: Sequence[Sequence[float]] | float | None = None,
        **base: Any,
    ):
        super().__init__(
            action_space, random_timesteps=random_timesteps, stddev=1.0, initial_scale=initial_scale,
            final_scale=final_scale, scale_timesteps=scale_timesteps, scale_schedule=scale_schedule, **base,
        )
        check_options(ou_theta=ou_theta, ou_sigma=ou_sigma, ou_base_scale=ou_base_scale)
        self.ou_theta = float(ou_theta)
        self.ou_sigma = float(ou_sigma)
        self.ou_base_scale = float(ou_base_scale)
        self._range = np.where(self._finite, self._high - self._low, 2.0).astype(np.float32)
        self.ou_state: np.ndarray | None = None

    def _noise(self, shape: tuple[int, ...], scale: float) -> np.ndarray:
        state = self.ou_state
        if state is None or state.shape != shape:
            state = np.zeros(shape, dtype=np.float32)
        state += self.ou_theta * (-state) + self.ou_sigma * self.np_random.standard_normal(shape, dtype=np.float32)
        self.ou_state = state
        return np.float32(self.ou_base_scale * scale) * state * self._range

    def get_state(self) -> dict:
        """The base state plus "ou_state" (nested lists, or None before the first noisy step)."""
        state = super().get_state()
        state["ou_state"] = None if self.ou_state is None else self.ou_state.tolist()
        return state

    def set_state(self, state: dict) -> None:
        """Restore the timestep and the OU state."""
        super().set_state(state)
        if "ou_state" in state:
            ou = state["ou_state"]
            self.ou_state = None if ou is None else np.array(ou, dtype=np.float32)
