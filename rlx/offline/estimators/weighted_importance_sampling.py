"""Step-wise weighted importance sampling (Precup et al., 2000; RLlib's WeightedImportanceSampling).

As importance sampling, but each cumulative ratio p_t is divided by w_t, the mean of p_t over
the batch's episodes that last at least t+1 steps: V_target = sum_t gamma^t (p_t / w_t) r_t.
Normalizing trades a little bias for much less variance than plain importance sampling.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.offline.estimators.off_policy_estimator import OffPolicyEstimator, discounted_return
from rlx.core.sample_batch import SampleBatch


class WeightedImportanceSampling(OffPolicyEstimator):
    """The step-wise weighted importance-sampling estimator."""

    def __init__(self, policy: Any, gamma: float = 0.0, epsilon_greedy: float = 0.0):
        super().__init__(policy, gamma, epsilon_greedy)
        #: Per time step t: the sum of p_t over the episodes that reached t, and their count.
        self.cummulative_ips_values: list[float] = []
        self.episode_timestep_count: list[float] = []
        #: Episode (the object peeked at) -> its cumulative ratios p_t.
        self.p: dict[Any, np.ndarray] = {}

    def on_before_split_batch_by_episode(self, sample_batch: SampleBatch) -> SampleBatch:
        """Forget the normalizers of the previous batch."""
        self.cummulative_ips_values, self.episode_timestep_count, self.p = [], [], {}
        return sample_batch

    @staticmethod
    def _key(episode: SampleBatch) -> int:
        # By object, not eps_id: an episode cut into fragments is several episodes of one eps_id.
        return id(episode)

    def peek_on_single_episode(self, episode: SampleBatch) -> None:
        """Add the episode's cumulative ratios to the per-step sums."""
        p = np.cumprod(self.compute_action_probs(episode) / self.behaviour_action_probs(episode))
        for t, p_t in enumerate(p.tolist()):
            if t >= len(self.cummulative_ips_values):
                self.cummulative_ips_values.append(p_t)
                self.episode_timestep_count.append(1.0)
            else:
                self.cummulative_ips_values[t] += p_t
                self.episode_timestep_count[t] += 1.0
        self.p[self._key(episode)] = p

    def estimate_on_single_episode(self, episode: SampleBatch) -> dict[str, Any]:
        """V_behavior = sum_t gamma^t r_t; V_target = sum_t gamma^t (p_t / w_t) r_t."""
        key = self._key(episode)
        if key not in self.p:
            raise ValueError("WeightedImportanceSampling.estimate_on_single_episode() needs the episode to have gone "
                             "through peek_on_single_episode() first; call estimate(batch).")
        rewards = np.asarray(episode[Columns.REWARDS], np.float64)
        n = len(rewards)
        w = np.asarray(self.cummulative_ips_values[:n]) / np.asarray(self.episode_timestep_count[:n])
        discounts = self.gamma ** np.arange(n)
        return {"v_behavior": discounted_return(rewards, self.gamma),
                "v_target": float(np.sum(discounts * self.p[key] / w * rewards))}

    def estimate_on_single_step_samples(self, batch: SampleBatch) -> dict[str, Any]:
        """Per row: V_behavior = r; V_target = (w / mean(w)) r with w = pi(a|s) / mu(a|s)."""
        rewards = np.asarray(batch[Columns.REWARDS], np.float64)
        weights = self.compute_action_probs(batch) / self.behaviour_action_probs(batch)
        return {"v_behavior": rewards, "v_target": weights * rewards / np.mean(weights)}
