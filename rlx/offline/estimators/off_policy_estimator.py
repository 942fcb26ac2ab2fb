"""OffPolicyEstimator: the base of the off-policy estimators (`ray.rllib.offline.estimators`).

An estimator judges a target policy from data another (behaviour) policy collected: the
batch's `action_prob` (or `action_logp`) are the behaviour policy's probabilities of the
actions taken, and the target policy's probabilities of the same actions come from `policy`.
`estimate(batch)` returns, averaged over the batch's episodes (or single steps):

- `v_behavior`: the discounted return the behaviour policy got,
- `v_target`: the estimated discounted return of the target policy,
- `v_behavior_std`, `v_target_std`: their standard deviations over the episodes,
- `v_gain`: v_target / max(v_behavior, 1e-8), and `v_delta`: v_target - v_behavior.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.core.columns import Columns
from rlx.offline.episode_rows import ACTION_PROB
from rlx.offline.estimators.target_policy import log_likelihoods
from rlx.offline.training_batch import fragment_bounds
from rlx.core.sample_batch import SampleBatch, as_multi_agent


def to_single_policy_batch(batch: Any) -> SampleBatch:
    """The SampleBatch of a single-agent batch, or of a MultiAgentBatch holding one policy."""
    per_module = as_multi_agent(batch).policy_batches
    if len(per_module) != 1:
        raise ValueError(f"Off-policy estimation works on one policy's data; the batch holds policies "
                         f"{sorted(per_module)}.")
    batch = next(iter(per_module.values()))
    return batch if isinstance(batch, SampleBatch) else SampleBatch(batch)


def split_by_episode(batch: SampleBatch) -> list[SampleBatch]:
    """The batch's episodes (rows of one `eps_id` and agent, cut after a terminated or truncated
    row), in row order."""
    columns = batch
    if Columns.TERMINATEDS not in batch:  # e.g. bandit data: episodes told apart by eps_id alone
        columns = {**batch, Columns.TERMINATEDS: np.zeros(len(batch[Columns.REWARDS]), bool)}
    starts, lengths = fragment_bounds(columns)
    return [SampleBatch({k: np.asarray(v)[s:s + n] for k, v in batch.items()})
            for s, n in zip(starts.tolist(), lengths.tolist())]


def discounted_return(rewards: np.ndarray, gamma: float) -> float:
    """sum_t gamma^t r_t."""
    rewards = np.asarray(rewards, np.float64)
    return float(np.sum(rewards * gamma ** np.arange(len(rewards))))


class OffPolicyEstimator:
    """Interface of an off-policy estimator for counterfactual evaluation of `policy`.

    Args:
        policy: the target policy (an rlx Policy, or an object with
            `compute_log_likelihoods(actions, obs_batch)` and `action_space`).
        gamma: the discount factor.
        epsilon_greedy: the probability with which the target policy acts uniformly at random
            when deployed (Discrete actions only); its probabilities are mixed accordingly.
    """

    def __init__(self, policy: Any, gamma: float = 0.0, epsilon_greedy: float = 0.0):
        self.policy = policy
        self.gamma = float(gamma)
        self.epsilon_greedy = float(epsilon_greedy)

    # ------------------------------------------------------------------ subclass hooks

    def estimate_on_single_episode(self, episode: SampleBatch) -> dict[str, Any]:
        """{'v_behavior': float, 'v_target': float} of one episode."""
        raise NotImplementedError(f"{type(self).__name__} must implement estimate_on_single_episode()")

    def estimate_on_single_step_samples(self, batch: SampleBatch) -> dict[str, Any]:
        """{'v_behavior': array, 'v_target': array} with one value per row, each row a one-step
        episode (bandit data)."""
        raise NotImplementedError(f"{type(self).__name__} must implement estimate_on_single_step_samples()")

    def on_before_split_batch_by_episode(self, sample_batch: SampleBatch) -> SampleBatch:
        """Called with the whole batch before it is split into episodes; returns the batch."""
        return sample_batch

    def on_after_split_batch_by_episode(self, all_episodes: list[SampleBatch]) -> list[SampleBatch]:
        """Called with the list of episodes; returns the list."""
        return all_episodes

    def peek_on_single_episode(self, episode: SampleBatch) -> None:
        """Sees every episode once before any is estimated (WIS collects its normalizers here)."""

    def train(self, batch: Any) -> dict[str, Any]:
        """Train the estimator's model (if it has one) on `batch`; returns its metrics."""
        return {}

    # ------------------------------------------------------------------ estimation

    def estimate(self, batch: Any, split_batch_by_episode: bool = True) -> dict[str, Any]:
        """The off-policy estimates of `batch` (see the module docstring for the keys).

        `split_batch_by_episode=False` treats every row as a one-step episode.
        """
        batch = to_single_policy_batch(batch)
        self.check_action_prob_in_batch(batch)
        if split_batch_by_episode:
            batch = self.on_before_split_batch_by_episode(batch)
            episodes = self.on_after_split_batch_by_episode(split_by_episode(batch))
            for episode in episodes:
                self.peek_on_single_episode(episode)
            per_episode = [self.estimate_on_single_episode(e) for e in episodes]
            v_behavior = np.array([e["v_behavior"] for e in per_episode], np.float64)
            v_target = np.array([e["v_target"] for e in per_episode], np.float64)
        else:
            per_step = self.estimate_on_single_step_samples(batch)
            v_behavior = np.asarray(per_step["v_behavior"], np.float64)
            v_target = np.asarray(per_step["v_target"], np.float64)
        if v_behavior.size == 0:
            raise ValueError("Off-policy estimation got an empty batch.")
        estimates = {
            "v_behavior": float(v_behavior.mean()),
            "v_behavior_std": float(v_behavior.std()),
            "v_target": float(v_target.mean()),
            "v_target_std": float(v_target.std()),
        }
        estimates["v_gain"] = estimates["v_target"] / max(estimates["v_behavior"], 1e-8)
        estimates["v_delta"] = estimates["v_target"] - estimates["v_behavior"]
        return estimates

    def check_action_prob_in_batch(self, batch: Any) -> None:
        """ValueError unless the batch carries the behaviour policy's action probabilities."""
        if ACTION_PROB not in batch and Columns.ACTION_LOGP not in batch:
            raise ValueError(
                "Off-policy estimation is not possible unless the inputs include the behaviour policy's action "
                "probabilities (an 'action_prob' or 'action_logp' column; rlx writes both when the policy is "
                "stochastic). For DQN this means exploring with `exploration_config: {type: 'SoftQ'}`. You can also "
                "set `off_policy_estimation_methods: {}` to disable estimation.")

    def behaviour_action_probs(self, batch: Any) -> np.ndarray:
        """The behaviour policy's probabilities of the batch's actions."""
        if ACTION_PROB in batch:
            return np.asarray(batch[ACTION_PROB], np.float64).reshape(-1)
        return np.exp(np.asarray(batch[Columns.ACTION_LOGP], np.float64)).reshape(-1)

    def compute_action_probs(self, batch: Any) -> np.ndarray:
        """The target policy's probabilities of the batch's actions (mixed with the uniform
        policy by `epsilon_greedy`)."""
        new_prob = np.exp(log_likelihoods(self.policy, batch[Columns.OBS], batch[Columns.ACTIONS]))
        if self.epsilon_greedy > 0.0:
            space = getattr(self.policy, "action_space", None)
            if not isinstance(space, gym.spaces.Discrete):
                raise ValueError("Evaluation with epsilon-greedy exploration is only supported with discrete action "
                                 "spaces.")
            eps = self.epsilon_greedy
            new_prob = new_prob * (1.0 - eps) + eps / int(space.n)
        return new_prob
