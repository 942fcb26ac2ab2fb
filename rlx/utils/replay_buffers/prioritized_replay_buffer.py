"""Proportional prioritized replay (Schaul et al. 2016) on top of the uniform ring buffer."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.utils.errors import ConfigError
from rlx.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit
from rlx.utils.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree


def _check_non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"prioritized replay {name} must be a number, got {value!r}.")
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ConfigError(f"prioritized replay {name} must be finite and >= 0, got {value!r}.")
    return value


class PrioritizedReplayBuffer(ReplayBuffer):
    """Replay buffer that samples row i with probability p_i^alpha / sum_j p_j^alpha.

    New rows get the largest priority seen so far (`max_priority`, starting at 1.0), so every
    transition is replayed at least about once before its TD error is known. Sampled batches carry
    importance weights `(N * P(i)) ** -beta`, normalised by their largest possible value.
    """

    def __init__(
        self,
        capacity: int = 10_000,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        seed: Any = None,
        storage_unit: str = StorageUnit.TIMESTEPS,
    ):
        super().__init__(capacity, seed=seed, storage_unit=storage_unit)
        self.alpha = _check_non_negative("alpha", alpha)
        self.beta = _check_non_negative("beta", beta)
        self.eps = _check_non_negative("eps", eps)
        self.max_priority = 1.0
        self._sum_tree = SumSegmentTree(self._capacity)
        self._min_tree = MinSegmentTree(self._capacity)

    def stats(self) -> dict[str, Any]:
        """Size, capacity, num_added, max_priority and the sum of the stored p^alpha."""
        out = super().stats()
        out["max_priority"] = self.max_priority
        out["sum_priorities"] = self._sum_tree.sum()
        return out

    def _on_rows_written(self, rows: np.ndarray) -> None:
        self._set_leaves(rows, np.full(rows.shape[0], self.max_priority ** self.alpha))

    def _set_leaves(self, rows: np.ndarray, values: np.ndarray) -> None:
        self._sum_tree.update(rows, values)
        self._min_tree.update(rows, values)

    def sample(
        self, num_items: int, *, n_step: int = 1, gamma: float = 0.99, beta: float | None = None
    ) -> dict[str, np.ndarray]:
        """Draw `num_items` rows proportionally to p^alpha (stratified: one draw per equal slice of
        the total), with importance weights for `beta` (default: the buffer's `beta`).

        Everything else is as in `ReplayBuffer.sample`; `weights` are float32 and at most 1.
        """
        return super().sample(num_items, n_step=n_step, gamma=gamma, beta=beta)

    def _draw(self, num_items: int, beta: float | None) -> tuple[np.ndarray, np.ndarray]:
        beta = self.beta if beta is None else _check_non_negative("beta", beta)
        size = len(self)
        total = self._sum_tree.sum()
        if not total > 0:
            raise ValueError("cannot sample: every stored priority is 0 (use eps > 0 to keep them positive).")
        prefix = (np.arange(num_items) + self._rng.random(num_items)) * (total / num_items)
        rows = self._sum_tree.find_prefixsum_idx(prefix, size)
        probs = self._sum_tree[rows] / total
        max_weight = (size * self._min_tree.min() / total) ** -beta
        weights = (size * probs) ** -beta / max_weight
        return rows, weights.astype(np.float32)

    def update_priorities(self, batch_indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of rows `batch_indexes` (from `sample()`) to new |TD errors|.

        Stores `(priorities + eps) ** alpha`; repeated rows keep their last priority. NaN,
        infinite or negative priorities raise ValueError.
        """
        rows = np.asarray(batch_indexes).reshape(-1)
        prios = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if rows.shape != prios.shape:
            raise ValueError(f"got {rows.size} batch_indexes but {prios.size} priorities.")
        if rows.size == 0:
            return
        if rows.dtype.kind not in "iu":
            raise ValueError(f"batch_indexes must be integers, got dtype {rows.dtype}.")
        if rows.min() < 0 or rows.max() >= len(self):
            raise ValueError(f"batch_indexes must lie in [0, {len(self)}), the filled part of the buffer.")
        if not np.isfinite(prios).all() or (prios < 0).any():
            bad = prios[~np.isfinite(prios) | (prios < 0)][0]
            raise ValueError(f"priorities must be finite and >= 0 (pass |TD error|), got {bad!r}.")
        prios = prios + self.eps
        self._set_leaves(rows, prios ** self.alpha)
        self.max_priority = max(self.max_priority, float(prios.max()))

    def get_state(self) -> dict[str, Any]:
        """`ReplayBuffer.get_state()` plus alpha, beta, eps, max_priority and the stored p^alpha."""
        state = super().get_state()
        state.update(
            alpha=self.alpha,
            beta=self.beta,
            eps=self.eps,
            max_priority=self.max_priority,
            priorities=self._sum_tree.leaves(len(self)),
        )
        return state

    _STATE_KEYS = ReplayBuffer._STATE_KEYS + ("alpha", "beta", "eps", "max_priority", "priorities")

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state()` dict, priorities and sampling generator included."""
        # Check the prioritized part before the base class starts replacing storage.
        self._check_state_keys(state)
        size = state["size"]
        priorities = np.asarray(state["priorities"], dtype=np.float64).reshape(-1)
        if priorities.shape != (size,):
            raise ValueError(f"replay buffer state key 'priorities' has {priorities.size} entries, expected {size}.")
        if not np.isfinite(priorities).all() or (priorities < 0).any():
            raise ValueError("replay buffer state key 'priorities' holds NaN, infinite or negative values.")
        hyper = {k: _check_non_negative(k, state[k]) for k in ("alpha", "beta", "eps", "max_priority")}
        super().set_state(state)
        self.alpha, self.beta, self.eps = hyper["alpha"], hyper["beta"], hyper["eps"]
        self.max_priority = hyper["max_priority"]
        self._sum_tree = SumSegmentTree(self._capacity)
        self._min_tree = MinSegmentTree(self._capacity)
        self._set_leaves(np.arange(len(self)), priorities)
