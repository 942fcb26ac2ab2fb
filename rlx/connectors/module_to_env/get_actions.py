"""GetActions: sample actions from the module's action distribution inputs."""
from __future__ import annotations

from typing import Any

import torch

from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns


class GetActions(ConnectorV2):
    """Adds ACTIONS (and ACTION_LOGP) sampled from ACTION_DIST_INPUTS, unless the module already
    chose actions: a sample of the exploration distribution when exploring, else the inference
    distribution's deterministic action."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        if Columns.ACTIONS in batch or Columns.ACTION_DIST_INPUTS not in batch:
            return batch
        inputs = batch[Columns.ACTION_DIST_INPUTS]
        inputs = inputs if isinstance(inputs, torch.Tensor) else torch.as_tensor(inputs)
        if explore:
            dist = rl_module.get_exploration_action_dist_cls().from_logits(inputs)
            actions = dist.sample()
            batch[Columns.ACTION_LOGP] = dist.logp(actions)
        else:
            dist = rl_module.get_inference_action_dist_cls().from_logits(inputs)
            actions = dist.to_deterministic().sample() if hasattr(dist, "to_deterministic") else dist.sample()
        batch[Columns.ACTIONS] = actions
        return batch
