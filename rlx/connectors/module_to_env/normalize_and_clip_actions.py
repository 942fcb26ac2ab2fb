"""NormalizeAndClipActions: map the module's actions into the env's action space."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class NormalizeAndClipActions(ConnectorV2):
    """Adds ACTIONS_FOR_ENV: ACTIONS rescaled from [-1, 1] to a Box action space's bounds
    (normalize_actions) or clipped to them (clip_actions); other spaces pass unchanged.

    Args:
        normalize_actions: the module acts in [-1, 1]; rescale to the space's bounds.
        clip_actions: clip to the space's bounds.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 normalize_actions: bool = True, clip_actions: bool = False, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.normalize_actions = bool(normalize_actions)
        self.clip_actions = bool(clip_actions)

    def _to_env(self, actions: np.ndarray) -> np.ndarray:
        space = self.input_action_space
        if not isinstance(space, gym.spaces.Box):
            return actions
        if self.normalize_actions:
            actions = space.low + (np.clip(actions, -1.0, 1.0) + 1.0) * 0.5 * (space.high - space.low)
        elif self.clip_actions:
            actions = np.clip(actions, space.low, space.high)
        return actions.astype(space.dtype, copy=False)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if Columns.ACTIONS not in batch:
            return batch
        actions = batch[Columns.ACTIONS]
        if isinstance(actions, torch.Tensor):
            actions = actions.detach().cpu().numpy()
        batch[Columns.ACTIONS_FOR_ENV] = self._to_env(np.asarray(actions))
        return batch
