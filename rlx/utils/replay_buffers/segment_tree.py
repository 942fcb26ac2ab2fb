"""Sum and min segment trees over a flat NumPy array, updated and searched a whole batch at a time.

Layout: `capacity` is rounded up to a power of two `P`; the tree is one float64 array of `2 * P`
nodes where node 1 is the root, node `i` has children `2i` and `2i + 1`, and leaf `j` sits at
node `P + j`. Unused leaves hold the neutral element (0 for sums, +inf for minima), so the root
is always the sum / min of the real leaves.
"""
from __future__ import annotations

import numpy as np


class _SegmentTree:
    """Shared storage and vectorised update of a binary segment tree; subclasses pick the operation."""

    _neutral: float
    _op: np.ufunc

    def __init__(self, capacity: int):
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError(f"a segment tree needs capacity >= 1, got {capacity}.")
        self._capacity = capacity
        self._num_leaves = 1 << (capacity - 1).bit_length()
        self._depth = self._num_leaves.bit_length() - 1
        self._tree = np.full(2 * self._num_leaves, self._neutral, dtype=np.float64)
        # Row i of this view is the pair of children (2i, 2i + 1) of node i: one gather per level.
        self._children = self._tree.reshape(self._num_leaves, 2)

    @property
    def capacity(self) -> int:
        """Number of usable leaves (as requested, before rounding up to a power of two)."""
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
        """Set leaves `indices` to `values` and recompute their ancestors.

        Repeated indices are allowed: the value that comes last in `indices` wins.
        """
        idx = self._leaf_indices(indices).reshape(-1)
        vals = np.broadcast_to(np.asarray(values, dtype=np.float64), np.shape(indices)).reshape(-1)
        if idx.size == 0:
            return
        if idx.size > 1:
            # np.unique on the reversed arrays keeps each index's last occurrence: NumPy does not
            # define which write wins when a fancy assignment repeats an index.
            leaves, last = np.unique(idx[::-1], return_index=True)
            vals = vals[::-1].take(last)
        else:
            leaves = idx
        self._update_unique(leaves + self._num_leaves, vals)

    #: Up to this many leaves, ancestors are recomputed in a plain Python loop: a few scalar
    #: operations per level beat a few NumPy calls per level (3x faster for the 1-8 rows an
    #: env step adds).
    _SCALAR_UPDATE_MAX = 8

    def _update_unique(self, nodes: np.ndarray, values: np.ndarray) -> None:
        """Write distinct, sorted leaf nodes and recompute their ancestors level by level."""
        self._tree.put(nodes, values)
        if nodes.size <= self._SCALAR_UPDATE_MAX:
            self._recompute_path_scalar(nodes.tolist())
        else:
            self._recompute_ancestors(nodes)

    def _recompute_path_scalar(self, nodes: list[int]) -> None:
        # Each leaf's path is walked to the root; a node shared by several paths is recomputed
        # again by the later path, from children that are final by then.
        tree = self._tree
        op = self._scalar_op
        for node in nodes:
            node >>= 1
            while node:
                new = op(tree[2 * node], tree[2 * node + 1])
                if self._stop_when_unchanged and new == tree[node]:
                    break
                tree[node] = new
                node >>= 1

    def _recompute_ancestors(self, nodes: np.ndarray) -> None:
        for _ in range(self._depth):
            nodes = nodes >> 1
            # Parents shared by several updated leaves repeat here; every copy writes the same
            # value, so duplicates are only dropped (neighbours, as `nodes` is sorted) for big updates.
            if nodes.size > 1024:
                nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            children = self._children.take(nodes, axis=0)
            self._tree.put(nodes, self._op(children[:, 0], children[:, 1]))

    def rebuild(self) -> None:
        """Recompute every internal node from the leaves (one vectorised pass per level)."""
        size = self._num_leaves
        while size > 1:
            half = size // 2
            level = self._tree[size:2 * size].reshape(half, 2)
            self._tree[half:size] = self._op(level[:, 0], level[:, 1])
            size = half

    def __getitem__(self, indices: np.ndarray | int) -> np.ndarray | float:
        """Leaf values at `indices` (an int gives a float, an array an array of the same shape)."""
        idx = self._leaf_indices(indices)
        out = self._tree[idx + self._num_leaves]
        return float(out) if np.ndim(out) == 0 else out

    def leaves(self, size: int | None = None) -> np.ndarray:
        """A copy of the first `size` leaves (all `capacity` leaves by default)."""
        size = self._capacity if size is None else int(size)
        start = self._num_leaves
        return self._tree[start:start + size].copy()


class SumSegmentTree(_SegmentTree):
    """Segment tree whose root is the sum of the leaves; finds the leaf owning a prefix sum."""

    _neutral = 0.0
    _op = np.add
    _scalar_op = staticmethod(float.__add__)
    _stop_when_unchanged = False
    def sum(self) -> float:
        """Sum of all leaves (the root, O(1))."""
        return float(self._tree[1])

    def find_prefixsum_idx(self, prefixsums: np.ndarray, size: int | None = None) -> np.ndarray:
        """For each prefix sum `u`, the leaf `i` with `sum(leaves[:i]) <= u < sum(leaves[:i + 1])`.

        One descent for the whole array: the loop runs over the tree depth, not over items. The
        descent never enters a subtree whose sum is 0, and the result is clamped to `size - 1`
        (`size` = number of filled leaves, default `capacity`), so a prefix sum equal to the total
        (floating error included) returns the last non-empty leaf rather than an unfilled one.
        """
        size = self._capacity if size is None else int(size)
        if not 1 <= size <= self._capacity:
            raise ValueError(f"size must be in [1, {self._capacity}], got {size}.")
        rest = np.array(prefixsums, dtype=np.float64, copy=True).reshape(-1)
        nodes = np.ones(rest.size, dtype=np.int64)
        for _ in range(self._depth):
            children = self._children.take(nodes, axis=0)
            left = children[:, 0]
            go_right = rest >= left
            go_right &= children[:, 1] > 0.0
            rest -= left * go_right
            nodes <<= 1
            nodes += go_right
        leaves = nodes - self._num_leaves
        np.minimum(leaves, size - 1, out=leaves)
        return leaves.reshape(np.shape(prefixsums))


class MinSegmentTree(_SegmentTree):
    """Segment tree whose root is the minimum of the leaves (unset leaves are +inf)."""

    _neutral = float("inf")
    _op = np.minimum
    _scalar_op = staticmethod(min)
    _stop_when_unchanged = True

    def _recompute_ancestors(self, nodes: np.ndarray) -> None:
        # A parent whose minimum did not change leaves all higher ancestors unchanged, so the
        # walk stops early (typical: a new row at max priority changes nothing above it).
        for _ in range(self._depth):
            nodes = nodes >> 1
            if nodes.size > 1024:
                nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            children = self._children.take(nodes, axis=0)
            new = np.minimum(children[:, 0], children[:, 1])
            if np.array_equal(new, self._tree.take(nodes)):
                return
            self._tree.put(nodes, new)

    def min(self) -> float:
        """Minimum of all leaves (the root, O(1)); +inf while no leaf is set."""
        return float(self._tree[1])
