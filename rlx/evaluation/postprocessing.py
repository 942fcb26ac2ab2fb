"""Old-API trajectory postprocessing: advantages and value targets of one episode stretch.

What `on_postprocess_trajectory` callbacks and custom policies import from RLlib's
`ray.rllib.evaluation.postprocessing`. Advantages a callback writes into the trajectory
(`batch[Postprocessing.ADVANTAGES]`, `batch[Postprocessing.VALUE_TARGETS]`) are what PPO's
Learner trains on instead of its own GAE.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.utils.postprocessing import compute_gae, discounted_cumsum


class Postprocessing:
    """Column names that postprocessing adds to a batch."""

    ADVANTAGES = Columns.ADVANTAGES
    VALUE_TARGETS = Columns.VALUE_TARGETS


def discount_cumsum(x: np.ndarray, gamma: float) -> np.ndarray:
    """y[t] = x[t] + gamma * y[t + 1] over a 1-D sequence (the discounted sum to the end)."""
    return discounted_cumsum(np.asarray(x, dtype=np.float64), gamma).astype(np.float32)


def compute_advantages(rollout: Any, last_r: float, gamma: float = 0.9, lambda_: float = 1.0,
                       use_gae: bool = True, use_critic: bool = True, rewards: np.ndarray | None = None,
                       vf_preds: np.ndarray | None = None) -> Any:
    """Add ADVANTAGES and VALUE_TARGETS to one trajectory (a SampleBatch or dict of 1-D columns).

    `last_r` is the value of the observation after the trajectory's last step (0 when it
    terminated). With use_gae: GAE(gamma, lambda_) over the rollout's `vf_preds`; without: the
    discounted returns (minus vf_preds when use_critic).
    """
    rewards = np.asarray(rollout[Columns.REWARDS] if rewards is None else rewards, dtype=np.float32)
    if use_gae:
        if not use_critic:
            raise ValueError("use_gae=True needs use_critic=True (GAE uses the value predictions).")
        vpred = np.asarray(rollout[Columns.VF_PREDS] if vf_preds is None else vf_preds, dtype=np.float32)
        next_vpred = np.concatenate([vpred[1:], np.array([last_r], dtype=np.float32)])
        no_cut = np.zeros((len(rewards), 1), dtype=bool)  # one stretch; last_r is 0 after a termination
        advantages, targets = compute_gae(rewards[:, None], vpred[:, None], next_vpred[:, None], no_cut, no_cut,
                                          gamma, lambda_)
        rollout[Postprocessing.ADVANTAGES] = advantages[:, 0]
        rollout[Postprocessing.VALUE_TARGETS] = targets[:, 0].astype(np.float32)
    else:
        returns = discount_cumsum(np.concatenate([rewards, np.array([last_r], np.float32)]), gamma)[:-1]
        if use_critic:
            vpred = np.asarray(rollout[Columns.VF_PREDS] if vf_preds is None else vf_preds, dtype=np.float32)
            rollout[Postprocessing.ADVANTAGES] = (returns - vpred).astype(np.float32)
        else:
            rollout[Postprocessing.ADVANTAGES] = returns
        rollout[Postprocessing.VALUE_TARGETS] = returns
    return rollout


def compute_gae_for_sample_batch(policy: Any, sample_batch: Any, other_agent_batches: Any = None,
                                 episode: Any = None) -> Any:
    """compute_advantages with the policy's gamma, lambda and value function, bootstrapping from
    the value of the trajectory's last next observation unless it terminated."""
    cfg = policy.config
    terminated = bool(np.asarray(sample_batch[Columns.TERMINATEDS])[-1])
    last_r = 0.0 if terminated else float(_values(policy, np.asarray(sample_batch[Columns.NEXT_OBS])[-1:])[0])
    if Columns.VF_PREDS not in sample_batch:
        sample_batch[Columns.VF_PREDS] = _values(policy, np.asarray(sample_batch[Columns.OBS]))
    return compute_advantages(sample_batch, last_r, cfg["gamma"], cfg["lambda"], use_gae=cfg.get("use_gae", True),
                              use_critic=cfg.get("use_critic", True))


def _values(policy: Any, obs: np.ndarray) -> np.ndarray:
    """The policy module's value estimates of a batch of (preprocessed) observations."""
    import torch

    with torch.no_grad():
        values = policy.module.compute_values({Columns.OBS: torch.from_numpy(np.ascontiguousarray(obs, np.float32))})
    return values.numpy().astype(np.float32)


__all__ = ["Postprocessing", "compute_advantages", "compute_gae_for_sample_batch", "discount_cumsum"]
