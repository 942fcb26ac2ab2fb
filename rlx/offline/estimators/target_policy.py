"""The target policy's action probabilities, as the off-policy estimators read them.

An estimator's `policy` is an rlx Policy (`algo.get_policy()`), whose module maps the offline
rows' observations (already preprocessed and filtered, as rlx writes them) to an action
distribution, or any object with RLlib's `compute_log_likelihoods(actions, obs_batch)` (a
hand-made policy in a test or a user's own).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.utils.errors import NotSupportedYetError


def _module(policy: Any) -> Any:
    module = getattr(policy, "module", None)
    if module is None or not hasattr(module, "forward_inference"):
        return None
    if getattr(module, "is_stateful", lambda: False)():
        raise NotSupportedYetError("off-policy estimation of a recurrent (stateful) policy",
                                   fix="Estimate a policy without use_lstm/use_attention.")
    return module


def log_likelihoods(policy: Any, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log pi(a_i | s_i) of the target `policy` for each row i, as float64."""
    module = _module(policy)
    if module is None:
        return np.asarray(policy.compute_log_likelihoods(actions=actions, obs_batch=obs), np.float64).reshape(-1)
    with torch.no_grad():
        inputs = module.forward_inference({Columns.OBS: torch.as_tensor(np.asarray(obs, np.float32))})
        dist = module.get_train_action_dist_cls().from_logits(inputs[Columns.ACTION_DIST_INPUTS])
        return dist.logp(torch.as_tensor(np.asarray(actions))).double().numpy().reshape(-1)


def action_probabilities(policy: Any, obs: np.ndarray) -> np.ndarray:
    """pi(a | s_i) for every action a of a Discrete action space: shape [N, n]."""
    space = getattr(policy, "action_space", None)
    if not isinstance(space, gym.spaces.Discrete):
        raise ValueError(f"The Fitted-Q model of DirectMethod/DoublyRobust needs a Discrete action space, the "
                         f"policy has {space}. Use ImportanceSampling or WeightedImportanceSampling instead.")
    obs = np.asarray(obs, np.float32)
    n, rows = int(space.n), obs.shape[0]
    # One log-likelihood call over all (row, action) pairs: rows repeated once per action.
    all_obs = np.repeat(obs, n, axis=0)
    all_actions = np.tile(np.arange(n), rows)
    return np.exp(log_likelihoods(policy, all_obs, all_actions)).reshape(rows, n)
