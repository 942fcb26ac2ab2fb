"""StochasticSampling: sample from the action distribution (optionally random at first)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import Distribution
from rlx.utils.exploration.exploration import (
    Exploration, NumpyActionFn, _as_logp, check_options, numpy_sample_or_mode,
)


class StochasticSampling(Exploration):
    """Sample actions from the distribution when exploring, else take its deterministic action.

    For the first `random_timesteps` global timesteps, exploring acts uniformly at
    random instead (logp zeros). This is the default exploration of the
    policy-gradient algorithms and SAC.
    """

    def __init__(self, action_space: gym.Space, *, random_timesteps: int = 0, **base: Any):
        check_options(random_timesteps=random_timesteps)
        super().__init__(action_space, **base)
        self.random_timesteps = int(random_timesteps)
        if self.random_timesteps > 0:
            self._require_random_actions("with random_timesteps > 0")

    def get_exploration_action(
        self,
        *,
        action_distribution: Distribution,
        timestep: int | torch.Tensor | None,
        explore: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random action during the random phase, a sample when exploring, else deterministic."""
        t = self._see_timestep(timestep)
        if not explore:
            action = action_distribution.deterministic_sample()
            return action, self.zero_logp(action)
        inputs = action_distribution.inputs
        if t < self.random_timesteps:
            action = self.random_actions(inputs.shape[0], None if inputs.is_cpu else inputs.device)
            return action, self.zero_logp(action)
        action = action_distribution.sample(self._generator_like(inputs))
        return action, _as_logp(action_distribution.logp(action))

    def numpy_action_fn(self, dist_cls: Any, explore: bool) -> NumpyActionFn | None:
        """get_exploration_action in NumPy (see Exploration.numpy_action_fn); steps in the random
        phase return None (they act through torch)."""
        if type(self).get_exploration_action is not StochasticSampling.get_exploration_action:
            return None
        act = numpy_sample_or_mode(self, dist_cls, explore)
        if act is None or not explore or self.random_timesteps <= 0:
            return act
        random_timesteps = self.random_timesteps
        return lambda inputs, timestep: None if timestep < random_timesteps else act(inputs, timestep)
