"""Filling in the behaviour-policy columns an offline record lacks, from the current policy.

Policy-gradient learners (PPO's ratio and KL terms) read `action_logp` and
`action_dist_inputs` of the policy that chose the actions. Records written by rlx or RLlib's
PPO carry them; other data (RLlib's DQN output, hand-made files) may not. Those columns are
then computed with the current policy, as RLlib's `postprocess_inputs` does ("using the current
policy, not the behavior policy"): the data counts as on-policy for this update.
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns

logger = logging.getLogger("rlx")

BEHAVIOUR_COLUMNS = (Columns.ACTION_LOGP, Columns.ACTION_DIST_INPUTS)


def fill_behaviour_columns(batch: dict[str, np.ndarray], module: Any) -> list[str]:
    """Add the missing behaviour columns to a time-major batch with `module`'s current policy;
    returns the names of the columns it added."""
    missing = [c for c in BEHAVIOUR_COLUMNS if c not in batch]
    if not missing or module is None or getattr(module, "is_stateful", lambda: False)():
        return []
    obs = batch[Columns.OBS]
    lead = obs.shape[:2]
    flat_obs = torch.from_numpy(np.ascontiguousarray(obs.reshape((-1,) + obs.shape[2:])))
    with torch.no_grad():
        dist_inputs = module.forward_inference({Columns.OBS: flat_obs})[Columns.ACTION_DIST_INPUTS]
        if Columns.ACTION_LOGP in missing:
            actions = batch[Columns.ACTIONS]
            flat_actions = torch.from_numpy(np.ascontiguousarray(actions.reshape((-1,) + actions.shape[2:])))
            dist = module.get_train_action_dist_cls().from_logits(dist_inputs)
            batch[Columns.ACTION_LOGP] = dist.logp(flat_actions).numpy().astype(np.float32).reshape(lead)
    if Columns.ACTION_DIST_INPUTS in missing:
        values = dist_inputs.numpy().astype(np.float32)
        batch[Columns.ACTION_DIST_INPUTS] = values.reshape(lead + values.shape[1:])
    return missing
