"""Random: act uniformly at random while exploring."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from rlx.core.action_masking import FLOAT_MIN, random_valid_actions
from rlx.core.distributions import Distribution
from rlx.utils.exploration.exploration import Exploration, to_numpy


class Random(Exploration):
    """Uniformly random actions from the action space when exploring (logp zeros).

    Without exploration it returns the distribution's deterministic action.
    """

    def __init__(self, action_space: gym.Space, **base: Any):
        super().__init__(action_space, **base)
        self._require_random_actions("")

    def get_exploration_action(
        self,
        *,
        action_distribution: Distribution,
        timestep: int | torch.Tensor | None,
        explore: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A uniformly random action when exploring, else the deterministic action."""
        self._see_timestep(timestep)
        if explore:
            inputs = action_distribution.inputs
            action = self._masked_random_actions(inputs) if self._space_kind == "discrete" else None
            if action is None:
                action = self.random_actions(inputs.shape[0], None if inputs.is_cpu else inputs.device)
        else:
            action = action_distribution.deterministic_sample()
        return action, self.zero_logp(action)

    def _masked_random_actions(self, inputs: torch.Tensor) -> torch.Tensor | None:
        """Uniform random actions among the unmasked ones (logits above FLOAT_MIN, see
        rlx.core.action_masking) when some action is masked, else None."""
        logits = to_numpy(inputs)
        if logits.ndim != 2 or not (logits <= FLOAT_MIN).any():
            return None
        return torch.from_numpy(random_valid_actions(logits, self.np_random)).to(inputs.device)

