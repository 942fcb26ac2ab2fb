"""The doubly-robust estimator (Jiang & Li, 2016): the fitted Q-model corrected by importance
weights, unbiased when either the model or the behaviour probabilities are right.

Backwards over an episode, with rho_t = pi(a_t|s_t) / mu(a_t|s_t):
V_DR(t) = V(s_t) + rho_t (r_t + gamma V_DR(t+1) - Q(s_t, a_t)), V_DR(T) = 0; the estimate is V_DR(0).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.offline.estimators.direct_method import make_q_model
from rlx.offline.estimators.off_policy_estimator import (OffPolicyEstimator, discounted_return,
                                                          to_single_policy_batch)
from rlx.core.sample_batch import SampleBatch


class DoublyRobust(OffPolicyEstimator):
    """The doubly-robust estimator; `q_model_config` as for DirectMethod."""

    def __init__(self, policy: Any, gamma: float = 0.0, epsilon_greedy: float = 0.0,
                 q_model_config: dict | None = None):
        super().__init__(policy, gamma, epsilon_greedy)
        self.model = make_q_model(policy, gamma, q_model_config)

    def estimate_on_single_episode(self, episode: SampleBatch) -> dict[str, Any]:
        """V_behavior = sum_t gamma^t r_t; V_target = V_DR(0) of the recursion above."""
        rewards = np.asarray(episode[Columns.REWARDS], np.float64)
        rho = self.compute_action_probs(episode) / self.behaviour_action_probs(episode)
        q = np.asarray(self.model.estimate_q(episode), np.float64).reshape(-1)
        v = np.asarray(self.model.estimate_v(episode), np.float64).reshape(-1)
        v_target = 0.0
        for t in reversed(range(len(rewards))):
            v_target = v[t] + rho[t] * (rewards[t] + self.gamma * v_target - q[t])
        return {"v_behavior": discounted_return(rewards, self.gamma), "v_target": float(v_target)}

    def estimate_on_single_step_samples(self, batch: SampleBatch) -> dict[str, Any]:
        """Per row: V_behavior = r; V_target = V(s) + rho (r - Q(s, a))."""
        rewards = np.asarray(batch[Columns.REWARDS], np.float64)
        rho = self.compute_action_probs(batch) / self.behaviour_action_probs(batch)
        q = np.asarray(self.model.estimate_q(batch), np.float64).reshape(-1)
        v = np.asarray(self.model.estimate_v(batch), np.float64).reshape(-1)
        return {"v_behavior": rewards, "v_target": v + rho * (rewards - q)}

    def train(self, batch: Any) -> dict[str, Any]:
        """Train the Q-model on `batch`; returns {'loss': mean training loss}."""
        losses = self.model.train(to_single_policy_batch(batch))
        return {"loss": float(np.mean(losses)) if np.size(losses) else float("nan")}
