"""Return and advantage estimators over time-major arrays [T, B]."""
from __future__ import annotations

import numpy as np


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over a [T, B] rollout.

    `next_values[t]` is V(s_{t+1}) for the observation that followed step t (the final
    observation at a truncation), `terminateds[t]` cuts the bootstrap, and `dones[t]`
    (terminated or truncated, or padding) cuts the recursion between episodes.

    Returns (advantages, value_targets) with value_targets = advantages + values.
    """
    T = rewards.shape[0]
    not_term = 1.0 - terminateds.astype(np.float32)
    not_done = 1.0 - dones.astype(np.float32)
    deltas = rewards + gamma * next_values * not_term - values
    advantages = np.zeros_like(deltas, dtype=np.float32)
    last = np.zeros(deltas.shape[1:], dtype=np.float32)
    decay = gamma * lambda_
    for t in range(T - 1, -1, -1):
        last = deltas[t] + decay * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


def discounted_returns(
    rewards: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    dones: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """Discounted returns over [T, B], bootstrapped with next_values where an episode
    was cut without terminating (truncation or the end of the rollout)."""
    T = rewards.shape[0]
    returns = np.zeros_like(rewards, dtype=np.float32)
    not_term = 1.0 - terminateds.astype(np.float32)
    not_done = 1.0 - dones.astype(np.float32)
    running = next_values[T - 1] * not_term[T - 1]
    for t in range(T - 1, -1, -1):
        # At a cut (done but not terminated) restart from the bootstrap value.
        boot = next_values[t] * not_term[t]
        running = rewards[t] + gamma * (not_done[t] * running + (1.0 - not_done[t]) * boot)
        returns[t] = running
    return returns
