"""GaussianNoise: deterministic action plus annealed Gaussian noise (DDPG/TD3 style)."""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import Distribution
from rlx.core.numpy_distributions import numpy_deterministic_fn
from rlx.utils.errors import ConfigError
from rlx.utils.exploration.exploration import (
    Exploration, NumpyActionFn, check_options, linear_schedule, make_schedule, to_numpy,
)


class GaussianNoise(Exploration):
    """Add N(0, stddev * scale(t)) to the deterministic action, clipped to the Box bounds.

    For the first `random_timesteps` global timesteps, exploring acts uniformly at
    random. After that the scale goes linearly from `initial_scale` to `final_scale` over
    `scale_timesteps` (or follows `scale_schedule`, a list of [timestep, scale] pairs).
    Without exploration the deterministic action is returned. logp is zeros.
    """

    def __init__(
        self,
        action_space: gym.Space,
        *,
        random_timesteps: int = 1000,
        stddev: float = 0.1,
        initial_scale: float = 1.0,
        final_scale: float = 0.02,
        scale_timesteps: int = 10000,
        scale_schedule: Sequence[Sequence[float]] | float | None = None,
        **base: Any,
    ):
        check_options(random_timesteps=random_timesteps, stddev=stddev, initial_scale=initial_scale,
                      final_scale=final_scale, scale_timesteps=scale_timesteps, scale_schedule=scale_schedule)
        if not isinstance(action_space, gym.spaces.Box):
            raise ConfigError(
                f"{type(self).__name__} needs a Box action space, got {action_space}. "
                "For Discrete action spaces use EpsilonGreedy or SoftQ."
            )
        super().__init__(action_space, **base)
        self.random_timesteps = int(random_timesteps)
        self.stddev = float(stddev)
        self.initial_scale = float(initial_scale)
        self.final_scale = float(final_scale)
        self.scale_timesteps = int(scale_timesteps)
        if scale_schedule is not None:
            self.scale_schedule = make_schedule(scale_schedule)
        else:
            self.scale_schedule = linear_schedule(
                self.initial_scale, self.final_scale, start=self.random_timesteps, duration=self.scale_timesteps,
            )
        self._low32 = self._low.astype(np.float32)
        self._high32 = self._high.astype(np.float32)

    def scale(self, timestep: int) -> float:
        """Noise scale at global `timestep`."""
        return self.scale_schedule.value(timestep)

    def get_exploration_action(
        self,
        *,
        action_distribution: Distribution,
        timestep: int | torch.Tensor | None,
        explore: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random in the random phase, deterministic + noise when exploring, else deterministic."""
        t = self._see_timestep(timestep)
        det = action_distribution.deterministic_sample()
        if not explore:
            return det, self.zero_logp(det)
        if t < self.random_timesteps:
            action = self.random_actions(det.shape[0], None if det.is_cpu else det.device)
            return action, self.zero_logp(action)
        action = torch.from_numpy(self._noisy(to_numpy(det).astype(np.float32, copy=False), t))
        if not det.is_cpu:
            action = action.to(det.device)
        return action, self.zero_logp(action)

    def numpy_action_fn(self, dist_cls: Any, explore: bool) -> NumpyActionFn | None:
        """get_exploration_action in NumPy (see Exploration.numpy_action_fn): the same draws from
        the same generator."""
        mode = numpy_deterministic_fn(dist_cls)
        if mode is None or type(self).get_exploration_action is not GaussianNoise.get_exploration_action:
            return None

        def act(inputs: np.ndarray, timestep: int) -> tuple[np.ndarray, np.ndarray]:
            self.last_timestep = t = int(timestep)
            det = mode(inputs).astype(np.float32, copy=False)
            zeros = np.zeros(det.shape[0], np.float32)
            if not explore:
                return det, zeros
            if t < self.random_timesteps:
                return self.random_actions(det.shape[0]).numpy(), zeros
            return self._noisy(det, t), zeros

        return act

    def _noisy(self, det: np.ndarray, timestep: int) -> np.ndarray:
        """Deterministic actions `det` plus the noise of `timestep`, clipped to the bounds."""
        noisy = det + self._noise(det.shape, self.scale(timestep))
        return np.clip(noisy, self._low32, self._high32).astype(np.float32, copy=False)

    def _noise(self, shape: tuple[int, ...], scale: float) -> np.ndarray:
        """The noise added to a batch of deterministic actions of `shape`."""
        return self.np_random.standard_normal(shape, dtype=np.float32) * np.float32(self.stddev * scale)

    def get_info(self) -> dict:
        """{"cur_scale": noise scale at the last timestep seen}."""
        return {"cur_scale": self.scale(self.last_timestep)}
