"""Step-wise importance sampling (Precup et al., 2000; RLlib's ImportanceSampling).

With p_t = prod_{k<=t} pi(a_k|s_k) / mu(a_k|s_k), the cumulative ratio of target (pi) to
behaviour (mu) probabilities, an episode's estimate is V_target = sum_t gamma^t p_t r_t.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.offline.estimators.off_policy_estimator import OffPolicyEstimator, discounted_return
from rlx.core.sample_batch import SampleBatch


class ImportanceSampling(OffPolicyEstimator):
    """The step-wise importance-sampling estimator."""

    def estimate_on_single_episode(self, episode: SampleBatch) -> dict[str, Any]:
        """V_behavior = sum_t gamma^t r_t; V_target = sum_t gamma^t p_t r_t."""
        rewards = np.asarray(episode[Columns.REWARDS], np.float64)
        p = np.cumprod(self.compute_action_probs(episode) / self.behaviour_action_probs(episode))
        discounts = self.gamma ** np.arange(len(rewards))
        return {"v_behavior": discounted_return(rewards, self.gamma),
                "v_target": float(np.sum(discounts * p * rewards))}

    def estimate_on_single_step_samples(self, batch: SampleBatch) -> dict[str, Any]:
        """Per row: V_behavior = r; V_target = (pi(a|s) / mu(a|s)) r."""
        rewards = np.asarray(batch[Columns.REWARDS], np.float64)
        weights = self.compute_action_probs(batch) / self.behaviour_action_probs(batch)
        return {"v_behavior": rewards, "v_target": weights * rewards}
