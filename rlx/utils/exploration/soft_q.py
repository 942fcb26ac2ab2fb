"""SoftQ: Boltzmann exploration, sampling from softmax(Q / temperature)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.distributions import Categorical, Distribution, MultiCategorical
from rlx.utils.errors import ConfigError
from rlx.utils.exploration.exploration import Exploration, _as_logp, check_options


class SoftQ(Exploration):
    """Sample from Categorical(Q / temperature) when exploring; argmax otherwise.

    For Discrete and MultiDiscrete spaces (Categorical / MultiCategorical inputs). The
    returned logp is that of the sampled action under the tempered distribution; a
    small temperature approaches greedy, a large one uniform.
    """

    def __init__(self, action_space: gym.Space, *, temperature: float = 1.0, **base: Any):
        check_options(temperature=temperature)
        super().__init__(action_space, **base)
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            raise ConfigError(
                f"SoftQ needs a Discrete or MultiDiscrete action space, got {action_space}."
            )
        self.temperature = float(temperature)
        self._input_lens = None if isinstance(action_space, gym.spaces.Discrete) else \
            [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]

    def get_exploration_action(
        self,
        *,
        action_distribution: Distribution,
        timestep: int | torch.Tensor | None,
        explore: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A sample of softmax(inputs / temperature) when exploring, else the argmax."""
        self._see_timestep(timestep)
        if not explore:
            action = action_distribution.deterministic_sample()
            return action, self.zero_logp(action)
        inputs = action_distribution.inputs.detach()
        if self._input_lens is None:
            tempered: Distribution = Categorical(inputs, temperature=self.temperature)
        else:
            tempered = MultiCategorical(inputs / self.temperature, input_lens=self._input_lens)
        action = tempered.sample(self._generator_like(inputs))
        return action, _as_logp(tempered.logp(action))

    def get_info(self) -> dict:
        """{"temperature": the softmax temperature}."""
        return {"temperature": self.temperature}
