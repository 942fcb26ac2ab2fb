"""GeneralAdvantageEstimation: advantages and value targets as a learner connector piece."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class GeneralAdvantageEstimation(ConnectorV2):
    """Adds ADVANTAGES and VALUE_TARGETS (GAE(gamma, lambda) with the module's value function,
    bootstrapping from NEXT_OBS where an episode was cut) and VF_PREDS to a time-major batch.
    rlx's PPO Learner computes the same itself; a batch that already has ADVANTAGES keeps them.

    Args:
        gamma: discount factor.
        lambda_: GAE's lambda.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 gamma: float = 0.99, lambda_: float = 1.0, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.gamma = float(gamma)
        self.lambda_ = float(lambda_)

    @torch.no_grad()
    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        from rlx.utils.postprocessing import compute_gae

        if Columns.ADVANTAGES in batch:
            return batch
        rewards = np.asarray(batch[Columns.REWARDS], np.float32)
        flat = rewards.ndim == 1
        if flat:
            batch = {k: (np.asarray(v)[:, None] if hasattr(v, "shape") else v) for k, v in batch.items()}
            rewards = rewards[:, None]
        obs = np.asarray(batch[Columns.OBS], np.float32)
        T, B = rewards.shape

        def values_of(x: np.ndarray) -> np.ndarray:
            out = rl_module.compute_values({Columns.OBS: torch.from_numpy(x.reshape((-1,) + x.shape[2:]))})
            return out.numpy().reshape(x.shape[:2])

        values = values_of(obs)
        next_values = values_of(np.asarray(batch[Columns.NEXT_OBS], np.float32))
        term = np.asarray(batch[Columns.TERMINATEDS], bool)
        dones = term | np.asarray(batch[Columns.TRUNCATEDS], bool)
        if Columns.VALID in batch:
            dones = dones | ~np.asarray(batch[Columns.VALID], bool)
        dones[-1] = True  # the rollout's end: bootstrap from the next observation's value
        adv, targets = compute_gae(rewards, values, next_values, term, dones, self.gamma, self.lambda_)
        batch[Columns.ADVANTAGES] = adv
        batch[Columns.VALUE_TARGETS] = targets
        batch[Columns.VF_PREDS] = values
        if flat:
            batch = {k: (v[:, 0] if hasattr(v, "shape") and v.ndim >= 2 and v.shape[1] == 1 else v)
                     for k, v in batch.items()}
        return batch
