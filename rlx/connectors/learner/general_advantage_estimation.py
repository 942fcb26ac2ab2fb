"""GeneralAdvantageEstimation: advantages and value targets as a learner connector piece."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns
from rlx.utils.postprocessing import estimate_advantages


class GeneralAdvantageEstimation(ConnectorV2):
    """Adds ADVANTAGES and VALUE_TARGETS (GAE(gamma, lambda) with the module's value function,
    bootstrapping from NEXT_OBS where an episode was cut) and VF_PREDS to a time-major batch, with
    the estimation rlx's PPO Learner runs itself (rlx.utils.postprocessing.estimate_advantages);
    a batch that already has ADVANTAGES keeps them.

    Args:
        gamma: discount factor.
        lambda_: GAE's lambda.
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 gamma: float = 0.99, lambda_: float = 1.0, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.gamma = float(gamma)
        self.lambda_ = float(lambda_)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if Columns.ADVANTAGES in batch:
            return batch
        flat = np.ndim(batch[Columns.REWARDS]) == 1
        if flat:  # one trajectory: a [T, 1] time-major batch
            batch = {k: (np.asarray(v)[:, None] if hasattr(v, "shape") else v) for k, v in batch.items()}
        # The value function sees float32 observations; the flags are read as booleans.
        inputs = dict(batch)
        for key in (Columns.OBS, Columns.NEXT_OBS, Columns.REWARDS):
            inputs[key] = np.asarray(batch[key], np.float32)
        for key in (Columns.TERMINATEDS, Columns.TRUNCATEDS, Columns.VALID):
            if key in batch:
                inputs[key] = np.asarray(batch[key], bool)
        adv, targets, values = estimate_advantages(rl_module, inputs, gamma=self.gamma, lambda_=self.lambda_)
        batch[Columns.ADVANTAGES] = adv
        batch[Columns.VALUE_TARGETS] = targets
        batch[Columns.VF_PREDS] = values
        if flat:
            batch = {k: (v[:, 0] if hasattr(v, "shape") and v.ndim >= 2 and v.shape[1] == 1 else v)
                     for k, v in batch.items()}
        return batch
