"""RandomRLModule: acts uniformly at random in its action space and cannot be trained."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.core.rl_module.rl_module import RLModule


class RandomRLModule(RLModule):
    """Returns `actions` drawn uniformly from the action space for every observation (a random
    opponent in self-play, a baseline). Leave it out of `policies_to_train`."""

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        n = len(obs) if not isinstance(obs, dict) else len(next(iter(obs.values())))
        actions = np.stack([np.asarray(self.action_space.sample()) for _ in range(n)]) if n else \
            np.zeros((0,) + tuple(self.action_space.shape or ()))
        return {Columns.ACTIONS: actions}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise TypeError("RandomRLModule acts at random and has nothing to train: leave its module id out of "
                        "config.multi_agent(policies_to_train=[...]).")

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to compile (kept for RLlib compatibility)."""
