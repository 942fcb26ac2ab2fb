"""Reward normalisation: rewards divided by the running standard deviation of the discounted return.

`ReturnScaler` is what `environment(normalize_rewards=True)` adds to each module's acting path:
as Stable-Baselines3's `VecNormalize(norm_reward=True)` does, every column of a sampled batch
(a sub-env, or an agent of one) keeps its discounted return `G = gamma * G + r`, the running
variance of those returns is updated with each new row, and each reward is divided by
sqrt(variance + 1e-8) and clipped to +-`clip`. The mean is not subtracted: the sign of a reward
stays. The scaled rewards are what the learner sees; episode returns in the metrics stay raw.

`with_reward_scaling` puts a scaler beside a module's observation filter (a FilterWithParts),
so that the runner group's filter sync (remote runners' statistics merged in the driver and
sent back) and the runner state in checkpoints hold the reward statistics too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.utils.filters import FilterWithParts, MeanStdFilter

#: Bound of the scaled rewards (VecNormalize's clip_reward).
REWARD_CLIP = 10.0
_EPSILON = 1e-8


class ReturnScaler:
    """Scales rewards by the running standard deviation of each column's discounted return.

    Args:
        gamma: the discount of the returns whose spread sets the scale (the algorithm's gamma).
        clip: scaled rewards are clipped to +-clip.
    """

    def __init__(self, gamma: float, clip: float = REWARD_CLIP):
        self.gamma = float(gamma)
        self.clip = float(clip)
        self.returns_stat = MeanStdFilter((), demean=False, clip=None)
        #: The discounted return of each column's episode so far (not synced: it belongs to this runner's envs).
        self.running_return = np.zeros(0, np.float64)

    @property
    def scale(self) -> float:
        """The current divisor: sqrt(variance of the returns + 1e-8); 1 until two returns were seen."""
        return float(np.sqrt(float(self.returns_stat.std) ** 2 + _EPSILON))

    def scale_rewards(self, rewards: np.ndarray, episode_ends: np.ndarray, valid: np.ndarray | None = None,
                      column_ids: np.ndarray | None = None) -> None:
        """Scale a time-major [T, B] reward column in place, row by row.

        `episode_ends` [T, B] marks the rows where a column's episode ended (terminated or
        truncated): its return starts again from 0 after them. Rows where `valid` is False (no
        step in that column) leave the column's return and the statistics alone. `column_ids`
        [B] names the columns' lasting identity (a sub-env, or an agent of one) when a batch
        holds a changing subset of them; by default column b is the runner's b-th sub-env.
        """
        if rewards.ndim != 2:
            raise ValueError(f"ReturnScaler.scale_rewards needs time-major [T, B] rewards, got shape {rewards.shape}.")
        ids = np.arange(rewards.shape[1]) if column_ids is None else np.asarray(column_ids, np.int64)
        needed = int(ids.max()) + 1 if len(ids) else 0
        if len(self.running_return) < needed:
            self.running_return = np.concatenate([self.running_return,
                                                  np.zeros(needed - len(self.running_return), np.float64)])
        running = self.running_return[ids]
        for t in range(rewards.shape[0]):
            row = rewards[t]
            stepped = slice(None) if valid is None else valid[t]
            running[stepped] = running[stepped] * self.gamma + row[stepped]
            self.returns_stat.update(running[stepped])
            np.clip(row / self.scale, -self.clip, self.clip, out=row, casting="unsafe")
            running[episode_ends[t]] = 0.0
        self.running_return[ids] = running

    def get_state(self) -> dict[str, Any]:
        """The return statistics (plain numbers)."""
        return {"type": "ReturnScaler", "gamma": self.gamma, "clip": self.clip,
                "returns": self.returns_stat.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state() (the columns' running returns start again from 0)."""
        self.returns_stat.set_state(state["returns"])
        self.running_return = np.zeros(0, np.float64)

    def pop_delta(self) -> dict[str, Any]:
        """The return statistics gathered since the last call."""
        return self.returns_stat.pop_delta()

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Fold another runner's pop_delta() in."""
        self.returns_stat.merge_delta(delta)


def with_reward_scaling(obs_filter: Any, gamma: float) -> FilterWithParts:
    """A module's observation filter with a ReturnScaler of `gamma` beside it (its part "reward_scaler")."""
    return FilterWithParts(obs_filter, reward_scaler=ReturnScaler(gamma))


def reward_scaler_of(module_filter: Any) -> ReturnScaler | None:
    """The ReturnScaler beside a module's observation filter, or None (normalize_rewards off)."""
    if isinstance(module_filter, FilterWithParts):
        return module_filter.parts.get("reward_scaler")
    return None
