"""Sum and min segment trees over NumPy arrays, updated and searched a whole batch at a time.

The trees are 16-ary: each level is one float64 array, level 0 holds the leaves (`capacity`
rounded up to a power of 16, unused leaves holding the neutral element: 0 for sums, +inf
for minima) and node `i` of level `l + 1` combines nodes `16 i .. 16 i + 15` of level `l`.
A binary tree over 50k leaves has 16 levels, this one 4; with a few NumPy calls per level,
an update or a batched prefix-sum search costs a quarter as many calls. Every internal node
is recomputed from its children (never updated by deltas), so equal leaves give bit-equal
sums and a restored buffer samples exactly as the original.
"""
from __future__ import annotations

import numpy as np

ARITY = 16


class _SegmentTree:
    """Shared storage and vectorised update of a 16-ary segment tree; subclasses pick the operation."""

    _neutral: float
    _reduce: np.ufunc

    def __init__(self, capacity: int):
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError(f"a segment tree needs capacity >= 1, got {capacity}.")
        self._capacity = capacity
        size = 1
        while size < capacity:
            size *= ARITY
        # levels[0] are the leaves, levels[-1] the single root.
        self._levels = []
        while True:
            self._levels.append(np.full(size, self._neutral, dtype=np.float64))
            if size == 1:
                break
            size //= ARITY

    @property
    def capacity(self) -> int:
        """Number of usable leaves (as requested, before rounding up to a power of 16)."""
        return self._capacity

    def _leaf_indices(self, indices: np.ndarray | int) -> np.ndarray:
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"segment tree indices must be integers, got dtype {idx.dtype}.")
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < 0 or idx.max() >= self._capacity):
            raise IndexError(f"segment tree index out of range [0, {self._capacity}).")
        return idx

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Set leaves `indices` to `values` and recompute their ancestors level by level.

        Repeated indices are allowed: the value that comes last in `indices` wins.
        """
        idx = self._leaf_indices(indices).reshape(-1)
        vals = np.broadcast_to(np.asarray(values, dtype=np.float64), np.shape(indices)).reshape(-1)
        if idx.size == 0:
            return
        if idx.size > 1:
            # np.unique on the reversed arrays keeps each index's last occurrence: NumPy does not
            # define which write wins when a fancy assignment repeats an index.
            idx, last = np.unique(idx[::-1], return_index=True)
            vals = vals[::-1].take(last)
        self._levels[0].put(idx, vals)
        nodes = idx
        for child, parent in zip(self._levels[:-1], self._levels[1:]):
            nodes = nodes // ARITY
            # Parents shared by several updated leaves repeat; every copy writes the same value.
            parent.put(nodes, self._reduce.reduce(child.reshape(-1, ARITY).take(nodes, axis=0), axis=1))

    def __getitem__(self, indices: np.ndarray | int) -> np.ndarray | float:
        """Leaf values at `indices` (an int gives a float, an array an array of the same shape)."""
        out = self._levels[0][self._leaf_indices(indices)]
        return float(out) if np.ndim(out) == 0 else out

    def leaves(self, size: int | None = None) -> np.ndarray:
        """A copy of the first `size` leaves (all `capacity` leaves by default)."""
        size = self._capacity if size is None else int(size)
        return self._levels[0][:size].copy()

    @property
    def _root(self) -> float:
        return float(self._levels[-1][0])


class SumSegmentTree(_SegmentTree):
    """Segment tree whose root is the sum of the leaves; finds the leaf owning a prefix sum."""

    _neutral = 0.0
    _reduce = np.add

    def sum(self) -> float:
        """Sum of all leaves (the root, O(1))."""
        return self._root

    def find_prefixsum_idx(self, prefixsums: np.ndarray, size: int | None = None) -> np.ndarray:
        """For each prefix sum `u`, the leaf `i` with `sum(leaves[:i]) <= u < sum(leaves[:i + 1])`.

        One descent for the whole array: the loop runs over the tree's levels, not over items.
        The descent never enters a child whose sum is 0, and the result is clamped to
        `size - 1` (`size` = number of filled leaves, default `capacity`), so a prefix sum equal
        to the total (floating error included) returns the last non-empty leaf rather than an
        unfilled one.
        """
        size = self._capacity if size is None else int(size)
        if not 1 <= size <= self._capacity:
            raise ValueError(f"size must be in [1, {self._capacity}], got {size}.")
        rest = np.array(prefixsums, dtype=np.float64, copy=True).reshape(-1)
        nodes = np.zeros(rest.size, dtype=np.int64)
        rows = np.arange(rest.size)
        last_col = ARITY - 1
        for level in reversed(self._levels[:-1]):
            children = level.reshape(-1, ARITY).take(nodes, axis=0)
            cums = np.cumsum(children, axis=1)
            # Children whose running sum is still <= u are passed over (zero-mass ones included).
            pick = (cums <= rest[:, None]).sum(axis=1)
            # Float error can leave u >= the node's total: take its last child with mass.
            last_with_mass = last_col - np.argmax(children[:, ::-1] > 0.0, axis=1)
            np.minimum(pick, last_with_mass, out=pick)
            before = np.where(pick > 0, cums[rows, np.maximum(pick - 1, 0)], 0.0)
            rest -= before
            nodes = nodes * ARITY + pick
        np.minimum(nodes, size - 1, out=nodes)
        return nodes.reshape(np.shape(prefixsums))


class MinSegmentTree(_SegmentTree):
    """Segment tree whose root is the minimum of the leaves (unset leaves are +inf)."""

    _neutral = float("inf")
    _reduce = np.minimum

    def min(self) -> float:
        """Minimum of all leaves (the root, O(1)); +inf while no leaf is set."""
        return self._root
