"""Observation filters: NoFilter and MeanStdFilter (running mean/std normalization), and
FilterWithParts, an observation filter with more synced statistics beside it."""
from __future__ import annotations

from typing import Any

import numpy as np


class NoFilter:
    """Passes observations through unchanged."""

    is_identity = True

    def __init__(self, shape: tuple[int, ...] = ()):
        self.shape = tuple(shape)

    def __call__(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        return x

    def apply_batch(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        """Filter a batch [N, *shape]."""
        return x

    def get_state(self) -> dict[str, Any]:
        """Serializable state."""
        return {"type": "NoFilter"}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state()."""

    def pop_delta(self) -> dict[str, Any]:
        """Statistics gathered since the last call: none for NoFilter."""
        return {}

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Fold another runner's statistics in: nothing to do for NoFilter."""

    # RLlib's Filter API (ray.rllib.utils.filter): a NoFilter has nothing to merge or copy.

    def apply_changes(self, other: "NoFilter", *args: Any, **kwargs: Any) -> None:
        """Fold another filter's new statistics in: nothing to do for NoFilter."""

    def sync(self, other: "NoFilter") -> None:
        """Take another filter's state: nothing to do for NoFilter."""

    def reset_buffer(self) -> None:
        """Forget the statistics gathered since the last sync: none for NoFilter."""

    clear_buffer = reset_buffer

    def copy(self) -> "NoFilter":
        """An independent copy."""
        return NoFilter(self.shape)

    as_serializable = copy


class MeanStdFilter:
    """Normalizes observations by a running mean and standard deviation, clipped to +-clip.

    Statistics are updated with every observation seen while `update=True` (Chan et al.'s
    parallel variance update, so batch and one-at-a-time updates agree).
    """

    is_identity = False

    def __init__(self, shape: tuple[int, ...], demean: bool = True, destd: bool = True, clip: float | None = 10.0):
        self.shape = tuple(shape)
        self.demean = demean
        self.destd = destd
        self.clip = clip
        self.count = 0
        self.mean = np.zeros(self.shape, dtype=np.float64)
        self.m2 = np.zeros(self.shape, dtype=np.float64)
        self._clear_delta()

    def _clear_delta(self) -> None:
        # What this filter saw since the last pop_delta(): remote runners send it to the
        # driver, which merges every runner's into one filter (RLlib's filter "buffer").
        self._delta = (0, np.zeros(self.shape, dtype=np.float64), np.zeros(self.shape, dtype=np.float64))

    @property
    def std(self) -> np.ndarray:
        """Current standard deviation (1 until two observations were seen)."""
        if self.count < 2:
            return np.ones(self.shape, dtype=np.float64)
        return np.sqrt(self.m2 / (self.count - 1))

    def update(self, batch: np.ndarray) -> None:
        """Fold a batch [N, *shape] into the running statistics."""
        n = batch.shape[0]
        if n == 0:
            return
        b_mean = batch.mean(axis=0, dtype=np.float64)
        b_m2 = ((batch - b_mean) ** 2).sum(axis=0, dtype=np.float64)
        self.count, self.mean, self.m2 = _combine((self.count, self.mean, self.m2), (n, b_mean, b_m2))
        self._delta = _combine(self._delta, (n, b_mean, b_m2))

    def pop_delta(self) -> dict[str, Any]:
        """The statistics gathered since the last call (count, mean, m2), then forget them."""
        count, mean, m2 = self._delta
        self._clear_delta()
        return {"count": int(count), "mean": mean.tolist(), "m2": m2.tolist()}

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Fold statistics another filter gathered (its pop_delta()) into this one."""
        if not delta or not delta.get("count"):
            return
        other = (int(delta["count"]), np.asarray(delta["mean"], dtype=np.float64).reshape(self.shape),
                 np.asarray(delta["m2"], dtype=np.float64).reshape(self.shape))
        self.count, self.mean, self.m2 = _combine((self.count, self.mean, self.m2), other)

    # RLlib's Filter API (ray.rllib.utils.filter), on top of pop_delta/merge_delta.

    def apply_changes(self, other: "MeanStdFilter", with_buffer: bool = False, *args: Any, **kwargs: Any) -> None:
        """Fold in what `other` saw since its buffer was last reset (its delta); with
        `with_buffer`, also take that delta as this filter's own buffer."""
        count, mean, m2 = other._delta
        if count:
            self.count, self.mean, self.m2 = _combine((self.count, self.mean, self.m2), (count, mean, m2))
        if with_buffer:
            self._delta = (count, mean.copy(), m2.copy())

    def sync(self, other: "MeanStdFilter") -> None:
        """Take `other`'s statistics and buffer (the settings stay this filter's)."""
        if other.shape != self.shape:
            raise ValueError(f"cannot sync a MeanStdFilter of shape {self.shape} with one of shape {other.shape}.")
        self.count, self.mean, self.m2 = other.count, other.mean.copy(), other.m2.copy()
        count, mean, m2 = other._delta
        self._delta = (count, mean.copy(), m2.copy())

    def reset_buffer(self) -> None:
        """Forget the statistics gathered since the last reset (they stay in the running stats)."""
        self._clear_delta()

    clear_buffer = reset_buffer

    def copy(self) -> "MeanStdFilter":
        """An independent copy (statistics and buffer)."""
        new = MeanStdFilter(self.shape, self.demean, self.destd, self.clip)
        new.sync(self)
        return new

    as_serializable = copy

    def apply_batch(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        """Update with (if `update`) and normalize a batch [N, *shape]."""
        if update:
            self.update(x)
        out = x
        if self.demean:
            out = out - self.mean
        if self.destd:
            out = out / (self.std + 1e-8)
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
        return out.astype(np.float32, copy=False)

    def __call__(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        return self.apply_batch(x[None], update=update)[0]

    def get_state(self) -> dict[str, Any]:
        """Serializable state (plain lists and numbers)."""
        return {
            "type": "MeanStdFilter",
            "shape": list(self.shape),
            "count": int(self.count),
            "mean": self.mean.tolist(),
            "m2": self.m2.tolist(),
            "demean": self.demean,
            "destd": self.destd,
            "clip": self.clip,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state()."""
        if tuple(state["shape"]) != self.shape:
            raise ValueError(f"MeanStdFilter state has shape {state['shape']}, expected {list(self.shape)}.")
        self.count = int(state["count"])
        self.mean = np.asarray(state["mean"], dtype=np.float64).reshape(self.shape)
        self.m2 = np.asarray(state["m2"], dtype=np.float64).reshape(self.shape)
        self._clear_delta()


def _combine(a: tuple[int, np.ndarray, np.ndarray], b: tuple[int, np.ndarray, np.ndarray]) \
        -> tuple[int, np.ndarray, np.ndarray]:
    """(count, mean, m2) of two sets of observations together (Chan et al.'s parallel update)."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    total = n_a + n_b
    if total == 0:
        return 0, mean_a, m2_a
    delta = mean_b - mean_a
    return total, mean_a + delta * (n_b / total), m2_a + m2_b + delta**2 * (n_a * n_b / total)


class FilterWithParts:
    """A module's observation filter with more statistics beside it that travel with it: the
    env-to-module connectors' state ("env_to_module"), the reward scaler of normalize_rewards
    ("reward_scaler"). It filters observations as its observation filter does; the runner
    group's filter sync (remote runners' statistics merged in the driver and sent back) and the
    runner state in checkpoints carry every part, as {"obs_filter": ..., name: ...}.

    Each part offers get_state/set_state/pop_delta/merge_delta (and may say `has_state`).
    Wrapping a FilterWithParts again adds the new parts to it.
    """

    def __init__(self, obs_filter: Any, **parts: Any):
        if isinstance(obs_filter, FilterWithParts):
            parts = {**obs_filter.parts, **parts}
            obs_filter = obs_filter.obs_filter
        self.obs_filter = obs_filter
        self.parts: dict[str, Any] = parts

    @property
    def is_identity(self) -> bool:
        """Whether observations pass unchanged (the runner then skips filtering them)."""
        return bool(self.obs_filter.is_identity)

    @property
    def has_state(self) -> bool:
        """Whether there is anything to sync across runners."""
        return bool(getattr(self.obs_filter, "has_state", not self.obs_filter.is_identity)) or \
            any(getattr(part, "has_state", True) for part in self.parts.values())

    def get_state(self) -> dict[str, Any]:
        """Every part's state."""
        return {"obs_filter": self.obs_filter.get_state(), **{n: p.get_state() for n, p in self.parts.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state(), or from a plain observation-filter state; parts the state
        does not name keep theirs (a checkpoint written without them)."""
        if "obs_filter" not in state:
            self.obs_filter.set_state(state)
            return
        self.obs_filter.set_state(state["obs_filter"])
        for name, part in self.parts.items():
            if name in state:
                part.set_state(state[name])

    def pop_delta(self) -> dict[str, Any]:
        """What every part learned since the last call."""
        return {"obs_filter": self.obs_filter.pop_delta(), **{n: p.pop_delta() for n, p in self.parts.items()}}

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Fold another runner's pop_delta() in."""
        self.obs_filter.merge_delta(delta.get("obs_filter", {}))
        for name, part in self.parts.items():
            if delta.get(name):
                part.merge_delta(delta[name])

    def __getattr__(self, name: str) -> Any:
        if name in ("obs_filter", "parts") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.obs_filter, name)


def make_filter(name: str, shape: tuple[int, ...]) -> NoFilter | MeanStdFilter:
    """Build the filter named by config `observation_filter`."""
    if name == "NoFilter":
        return NoFilter(shape)
    if name in ("MeanStdFilter", "ConcurrentMeanStdFilter"):
        return MeanStdFilter(shape)
    raise ValueError(f"Unknown observation_filter {name!r}; use 'NoFilter' or 'MeanStdFilter'.")
