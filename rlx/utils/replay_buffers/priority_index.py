"""PriorityIndex: the priorities of an episode buffer's stored steps, for proportional
prioritized sampling (Schaul et al. 2016) in O(log N) per batch.

Each stored step (an item: row index, agent id, timestep) owns one leaf of a sum and a min
segment tree; a row's leaves are freed when the row is evicted. The prioritized episode
buffers keep one index (single-agent) or one per module (multi-agent).
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from rlx.utils.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree


class PriorityIndex:
    """Leaves of sum/min segment trees holding priority^alpha of each stored step.

    Args:
        size: leaves to start with (the trees double when more steps are stored).
        alpha: how strongly priorities skew sampling (0 = uniform, 1 = proportional).
    """

    def __init__(self, size: int, alpha: float) -> None:
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}.")
        self.alpha = float(alpha)
        self.max_priority = 1.0
        self._make_trees(max(1, int(size)))
        #: Leaf -> the step it holds; global row index -> the leaves of its steps.
        self.leaf_to_item: dict[int, tuple] = {}
        self._row_leaves: dict[int, list[int]] = {}
        #: Leaves of the latest draw, in order (what update() sets).
        self.last_sampled: list[int] = []

    def __len__(self) -> int:
        return len(self.leaf_to_item)

    def _make_trees(self, size: int) -> None:
        self._sum = SumSegmentTree(size)
        self._min = MinSegmentTree(size)
        self._free: deque[int] = deque(range(size))

    def _grow(self) -> None:
        old_size = self._sum.capacity
        sums = self._sum.leaves()
        self._make_trees(2 * old_size)
        used = np.asarray(sorted(self.leaf_to_item), np.int64)
        self._set(used, sums[used])
        self._free = deque(i for i in range(2 * old_size) if i not in self.leaf_to_item)

    def _set(self, leaves: np.ndarray, values: np.ndarray) -> None:
        self._sum.update(leaves, values)
        self._min.update(leaves, values)

    def add(self, items: list[tuple]) -> None:
        """Give each new step a leaf with the largest priority seen so far."""
        while len(self._free) < len(items):
            self._grow()
        leaves = [self._free.popleft() for _ in items]
        for leaf, item in zip(leaves, items):
            self.leaf_to_item[leaf] = item
            self._row_leaves.setdefault(item[0], []).append(leaf)
        self._set(np.asarray(leaves, np.int64), np.full(len(leaves), self.max_priority ** self.alpha))

    def evict_row(self, index: int) -> None:
        """Free the leaves of the steps of evicted row `index`."""
        leaves = self._row_leaves.pop(index, [])
        if not leaves:
            return
        arr = np.asarray(leaves, np.int64)
        self._sum.update(arr, np.zeros(len(arr)))
        self._min.update(arr, np.full(len(arr), np.inf))
        for leaf in leaves:
            del self.leaf_to_item[leaf]
        self._free.extend(leaves)
        # Evicted steps of the latest draw can no longer get new priorities.
        self.last_sampled = [leaf for leaf in self.last_sampled if leaf in self.leaf_to_item]

    def draw(self, rng: np.random.Generator, batch_size: int, beta: float) -> tuple[list[tuple], np.ndarray]:
        """`batch_size` steps drawn in proportion to priority^alpha, with importance weights
        (p * N)^-beta normalised by the largest possible weight."""
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}.")
        stored = len(self.leaf_to_item)
        total = self._sum.sum()
        leaves = self._sum.find_prefixsum_idx(rng.random(batch_size) * total)
        p_sample = self._sum[leaves] / total
        p_min = self._min.min() / total
        weights = (p_sample * stored) ** (-beta) / (p_min * stored) ** (-beta)
        self.last_sampled = [int(leaf) for leaf in leaves]
        return [self.leaf_to_item[leaf] for leaf in self.last_sampled], weights

    def update(self, priorities: Any) -> None:
        """Set the priorities of the latest draw's steps, one per drawn step in its order."""
        priorities = np.asarray(priorities, np.float64).reshape(-1)
        if len(priorities) != len(self.last_sampled):
            raise ValueError(f"update_priorities() got {len(priorities)} priorities for the {len(self.last_sampled)} "
                             "transitions of the latest sample(); pass one per sampled transition, once after each "
                             "sample().")
        priorities = np.maximum(priorities, 1e-12)
        self._set(np.asarray(self.last_sampled, np.int64), priorities ** self.alpha)
        self.max_priority = max(self.max_priority, float(priorities.max(initial=0.0)))
        self.last_sampled = []

    def get_state(self) -> dict[str, Any]:
        """The priorities and leaf assignments as plain values."""
        return {"alpha": self.alpha, "max_priority": self.max_priority, "size": self._sum.capacity,
                "leaf_to_item": list(self.leaf_to_item.items()), "priorities": self._sum.leaves(),
                "last_sampled": list(self.last_sampled)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PriorityIndex":
        """The index of a `get_state()` dict."""
        index = cls(state["size"], state["alpha"])
        index.max_priority = state["max_priority"]
        index.leaf_to_item = {int(leaf): tuple(item) for leaf, item in state["leaf_to_item"]}
        for leaf, item in index.leaf_to_item.items():
            index._row_leaves.setdefault(item[0], []).append(leaf)
        used = np.asarray(sorted(index.leaf_to_item), np.int64)
        index._set(used, np.asarray(state["priorities"])[used])
        index._free = deque(i for i in range(state["size"]) if i not in index.leaf_to_item)
        index.last_sampled = list(state["last_sampled"])
        return index
