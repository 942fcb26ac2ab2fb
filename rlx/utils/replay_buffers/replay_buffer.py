"""Uniform replay buffer: a ring of single transitions with n-step returns assembled at sample time.

Each column is one preallocated NumPy array `[capacity, ...]`. Every stored row gets a lifetime
insert id (row position = id % capacity) and an int64 link `_next_id[row]` to the insert id of
the same lane's next step (-1 when the row ended an episode or has no successor yet). A lane is
one stream of consecutive steps: a sub-env column of time-major batches, or the single "flat"
stream of batch-major adds. Sampling follows these links for n-step returns, so the n-step
setting can change between calls without re-adding data.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean

#: Extra columns in every sampled batch.
BATCH_INDEXES = "batch_indexes"
N_STEP = "n_step"
#: Lane key of batch-major (`time_major=False`) adds, as stored in `get_state()["lane_keys"]`.
FLAT_LANE = -1

STATE_VERSION = 1
_RESERVED = (Columns.WEIGHTS, BATCH_INDEXES, N_STEP)
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


class StorageUnit:
    """What one stored item is (RLlib's `storage_unit`); only TIMESTEPS is built."""

    TIMESTEPS = "timesteps"
    EPISODES = "episodes"
    SEQUENCES = "sequences"
    FRAGMENTS = "fragments"

    ALL = (TIMESTEPS, EPISODES, SEQUENCES, FRAGMENTS)

    @classmethod
    def validate(cls, storage_unit: Any) -> str:
        """Return `storage_unit` as a string; raise for unknown or not-yet-built units.

        Enum members (RLlib's `StorageUnit.TIMESTEPS`) are accepted through their `.value`.
        """
        value = getattr(storage_unit, "value", storage_unit)
        if not isinstance(value, str) or value not in cls.ALL:
            hint = did_you_mean(str(value), cls.ALL) if isinstance(value, str) else ""
            raise ConfigError(
                f"unknown storage_unit {storage_unit!r}.{hint} Accepted: {', '.join(map(repr, cls.ALL))}."
            )
        if value != cls.TIMESTEPS:
            raise NotSupportedYetError(
                f"storage_unit={value!r}",
                "replay buffers store single timesteps and build n-step returns at sample time; "
                "use storage_unit='timesteps'",
            )
        return value


def _encode_rng_state(state: Any) -> str:
    """The bit generator's state as JSON text: its ints exceed 64 bits, which msgpack cannot hold."""

    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype)}
        if isinstance(obj, np.generic):
            return obj.item()
        raise TypeError(f"cannot encode {type(obj).__name__} in an RNG state")

    return json.dumps(state, default=default)


def _decode_rng_state(text: str) -> dict:
    def hook(obj: dict) -> Any:
        if "__ndarray__" in obj:
            return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
        return obj

    return json.loads(text, object_hook=hook)


def _as_int(value: Any, key: str) -> int:
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"replay buffer state key {key!r} must be an integer, got {value!r}.") from None
    if out != value:
        raise ValueError(f"replay buffer state key {key!r} must be an integer, got {value!r}.")
    return out


class ReplayBuffer:
    """Uniform replay of single transitions stored in a ring of `capacity` rows.

    `add()` takes batch-major `[N, ...]` or time-major `[T, B, ...]` column dicts; `sample()` draws
    rows uniformly with replacement and can assemble n-step returns by following episode links.
    """

    def __init__(self, capacity: int = 10_000, seed: Any = None, storage_unit: str = StorageUnit.TIMESTEPS):
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ConfigError(f"replay buffer capacity must be a positive int, got {capacity!r}.")
        self._capacity = int(capacity)
        self.storage_unit = StorageUnit.validate(storage_unit)
        self._rng = np.random.default_rng(seed)
        self._columns: dict[str, np.ndarray] | None = None
        self._next_id = np.full(self._capacity, -1, dtype=np.int64)
        self._num_added = 0
        # Lane key -> insert id of the lane's last row, only for lanes whose last row did not end
        # an episode (their next add continues that episode).
        self._lane_tail: dict[int, int] = {}

    # ------------------------------------------------------------------ size and counters

    @property
    def capacity(self) -> int:
        """Maximum number of stored rows."""
        return self._capacity

    @property
    def num_added(self) -> int:
        """Rows added over the buffer's lifetime (overwritten ones included)."""
        return self._num_added

    def __len__(self) -> int:
        return min(self._num_added, self._capacity)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={len(self)}, capacity={self._capacity}, num_added={self._num_added})"

    def stats(self) -> dict[str, Any]:
        """Size, capacity and lifetime number of added rows."""
        return {"size": len(self), "capacity": self._capacity, "num_added": self._num_added}

    # ------------------------------------------------------------------ adding

    def add(self, batch: Mapping[str, np.ndarray], time_major: bool = False, lane_offset: int = 0) -> None:
        """Store the rows of `batch`.

        `time_major=False`: columns are `[N, ...]`, one stream of steps in time order (the "flat"
        lane). `time_major=True`: columns are `[T, B, ...]` as EnvRunners produce; sub-env `b` is
        lane `lane_offset + b`, and rows are written t=0 (all b), t=1 (all b), ... A `valid` column
        marks the rows to store; it is not stored itself. A lane's next add continues its last
        episode unless that episode's last row was terminated or truncated.
        """
        if not isinstance(batch, Mapping):
            raise TypeError(f"ReplayBuffer.add() needs a dict of arrays, got {type(batch).__name__}.")
        if not time_major and lane_offset != 0:
            raise ValueError("lane_offset only applies to time_major=True batches.")
        if isinstance(lane_offset, bool) or int(lane_offset) != lane_offset or lane_offset < 0:
            raise ValueError(f"lane_offset must be a non-negative int, got {lane_offset!r}.")
        cols = {str(k): np.asarray(v) for k, v in batch.items()}
        valid = cols.pop(Columns.VALID, None)
        if not cols:
            raise ValueError("ReplayBuffer.add() got a batch without data columns.")
        bad = [k for k in _RESERVED if k in cols]
        if bad:
            raise ValueError(f"column(s) {bad} are reserved for sample() output; rename them before adding.")

        lead_ndim = 2 if time_major else 1
        first = next(iter(cols))
        lead = cols[first].shape[:lead_ndim]
        for name, arr in cols.items():
            if arr.ndim < lead_ndim or arr.shape[:lead_ndim] != lead:
                layout = "[T, B, ...]" if time_major else "[N, ...]"
                raise ValueError(
                    f"column {name!r} has shape {arr.shape} but {first!r} has leading shape {lead}; "
                    f"every column must be {layout} with the same leading dims."
                )
        num_rows = int(np.prod(lead))
        if time_major:
            lanes = np.tile(np.arange(lead[1], dtype=np.int64) + int(lane_offset), lead[0])
            cols = {k: v.reshape((num_rows,) + v.shape[2:]) for k, v in cols.items()}
        else:
            lanes = np.full(num_rows, FLAT_LANE, dtype=np.int64)
        ends = np.zeros(num_rows, dtype=bool)
        for key in (Columns.TERMINATEDS, Columns.TRUNCATEDS):
            if key in cols:
                ends |= cols[key].reshape(num_rows).astype(bool)
        if valid is not None:
            if valid.shape != lead:
                raise ValueError(f"column 'valid' has shape {valid.shape}, expected the leading shape {lead}.")
            keep = valid.reshape(num_rows).astype(bool)
            if not keep.all():
                cols = {k: v[keep] for k, v in cols.items()}
                lanes, ends = lanes[keep], ends[keep]
                num_rows = int(keep.sum())

        self._prepare_storage(cols)
        if num_rows == 0:
            return
        self._write(cols, lanes, ends, num_rows)

    def end_open_episodes(self) -> None:
        """Treat every lane's last stored row as the end of its episode.

        Call this when the env runners restart their episodes (a reset, or a restored
        buffer next to fresh envs), so n-step sampling never joins rows of different episodes.
        """
        self._lane_tail.clear()

    def _prepare_storage(self, cols: dict[str, np.ndarray]) -> None:
        """Allocate the columns from the first batch, or check a later batch against them."""
        if self._columns is None:
            for name, arr in cols.items():
                if arr.dtype.kind not in "biuf":
                    raise ValueError(
                        f"column {name!r} has dtype {arr.dtype}; replay buffers store bool, integer or float arrays."
                    )
            self._columns = {k: np.zeros((self._capacity,) + v.shape[1:], dtype=v.dtype) for k, v in cols.items()}
            return
        missing = sorted(set(self._columns) - set(cols))
        extra = sorted(set(cols) - set(self._columns))
        if missing or extra:
            raise ValueError(
                f"batch columns differ from the stored ones: missing {missing}, unexpected {extra}. "
                f"Stored columns: {sorted(self._columns)}."
            )
        for name, arr in cols.items():
            store = self._columns[name]
            if arr.shape[1:] != store.shape[1:]:
                raise ValueError(
                    f"column {name!r} has per-row shape {arr.shape[1:]}, but the buffer stores {store.shape[1:]}."
                )
            if not np.can_cast(arr.dtype, store.dtype, casting="same_kind"):
                raise ValueError(f"column {name!r} has dtype {arr.dtype}, which cannot be stored as {store.dtype}.")

    def _write(self, cols: dict[str, np.ndarray], lanes: np.ndarray, ends: np.ndarray, num_rows: int) -> None:
        cap = self._capacity
        ids = self._num_added + np.arange(num_rows, dtype=np.int64)
        next_ids = np.full(num_rows, -1, dtype=np.int64)

        # Within the batch: group rows by lane (stable, so each lane stays in time order) and link
        # every row to its lane's following row unless it ended an episode.
        order = np.argsort(lanes, kind="stable")
        sorted_lanes = lanes[order]
        same = sorted_lanes[1:] == sorted_lanes[:-1]
        link = same & ~ends[order[:-1]]
        next_ids[order[:-1][link]] = ids[order[1:][link]]
        heads = order[np.concatenate(([True], ~same))]
        tails = order[np.concatenate((~same, [True]))]

        # Across adds: continue each lane's open episode, if its last row is still stored.
        oldest_stored = self._num_added - cap
        for lane, head in zip(lanes[heads].tolist(), ids[heads].tolist()):
            prev = self._lane_tail.pop(lane, None)
            if prev is not None and prev >= oldest_stored:
                self._next_id[prev % cap] = head
        for lane, tail in zip(lanes[tails].tolist(), tails.tolist()):
            if not ends[tail]:
                self._lane_tail[lane] = int(ids[tail])

        # A batch larger than the ring keeps only its newest `cap` rows (ids still count them all).
        skip = max(0, num_rows - cap)
        start = int(ids[skip] % cap)
        for name, arr in cols.items():
            self._ring_write(self._columns[name], arr[skip:], start)
        self._ring_write(self._next_id, next_ids[skip:], start)
        self._num_added += num_rows
        self._on_rows_written(ids[skip:] % cap)

    def _ring_write(self, dst: np.ndarray, src: np.ndarray, start: int) -> None:
        n = src.shape[0]
        first = min(n, self._capacity - start)
        dst[start:start + first] = src[:first]
        if first < n:
            dst[: n - first] = src[first:]

    def _on_rows_written(self, rows: np.ndarray) -> None:
        """Hook for subclasses: `rows` (ring positions) were just (over)written."""

    # ------------------------------------------------------------------ sampling

    def sample(
        self, num_items: int, *, n_step: int = 1, gamma: float = 0.99, beta: float | None = None
    ) -> dict[str, np.ndarray]:
        """Draw `num_items` rows uniformly with replacement.

        Returns every stored column at those rows plus `weights` (float32 ones here),
        `batch_indexes` (int64 ring rows, for `update_priorities`) and `n_step` (int64 number of
        steps actually summed). With `n_step > 1`, each item follows its episode for up to
        `n_step` steps, stopping at a terminated/truncated row or the newest row of its lane:
        `rewards` becomes sum_k gamma^k r_k, and `new_obs`, `terminateds`, `truncateds` come from
        the last followed row, so the learner's target is
        `rewards + gamma ** n_step * (1 - terminateds) * Q(new_obs)`. `beta` is ignored by the
        uniform buffer (accepted so callers can treat every buffer alike).
        """
        num_items = self._check_sample_args(num_items, n_step)
        rows, weights = self._draw(num_items, beta)
        out = self._gather(rows, int(n_step), float(gamma))
        out[Columns.WEIGHTS] = weights
        out[BATCH_INDEXES] = rows
        return out

    def _check_sample_args(self, num_items: int, n_step: int) -> int:
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer: add() some rows first.")
        if isinstance(num_items, bool) or int(num_items) != num_items or num_items < 1:
            raise ValueError(f"num_items must be a positive int, got {num_items!r}.")
        if isinstance(n_step, bool) or int(n_step) != n_step or n_step < 1:
            raise ValueError(f"n_step must be a positive int, got {n_step!r}.")
        return int(num_items)

    def _draw(self, num_items: int, beta: float | None) -> tuple[np.ndarray, np.ndarray]:
        rows = self._rng.integers(0, len(self), size=num_items, dtype=np.int64)
        return rows, np.ones(num_items, dtype=np.float32)

    def _gather(self, rows: np.ndarray, n_step: int, gamma: float) -> dict[str, np.ndarray]:
        cols = self._columns
        assert cols is not None
        last = rows
        count = np.ones(rows.shape[0], dtype=np.int64)
        rewards = None
        if n_step > 1:
            if Columns.REWARDS not in cols:
                raise ValueError(f"n_step > 1 needs a {Columns.REWARDS!r} column; the buffer stores {sorted(cols)}.")
            raw = cols[Columns.REWARDS]
            rewards = raw.take(rows, axis=0).astype(np.result_type(raw.dtype, np.float32))
            oldest_stored = max(0, self._num_added - self._capacity)
            last = rows.copy()
            discount = 1.0
            # Rows that ended an episode carry -1, so one link test stops at episode ends, at the
            # newest row of a lane, and (defensively) at ids that have been overwritten.
            for _ in range(1, n_step):
                nxt = self._next_id.take(last)
                ok = nxt >= oldest_stored
                if not ok.any():
                    break
                discount *= gamma
                np.remainder(nxt, self._capacity, out=nxt)
                np.copyto(last, nxt, where=ok)
                mask = ok.reshape(ok.shape + (1,) * (raw.ndim - 1))  # rewards may be [N, k]
                np.add(rewards, raw.take(last, axis=0) * discount, out=rewards, where=mask)
                count += ok
        out = {}
        from_last = (Columns.NEXT_OBS, Columns.TERMINATEDS, Columns.TRUNCATEDS)
        for name, arr in cols.items():
            out[name] = arr.take(last if name in from_last else rows, axis=0)
        if rewards is not None:
            out[Columns.REWARDS] = rewards
        out[N_STEP] = count
        return out

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """The full buffer state as plain Python scalars, str-keyed dicts and C-contiguous arrays.

        Packs with `ormsgpack.packb(state, option=ormsgpack.OPT_SERIALIZE_NUMPY)` or as
        safetensors (the arrays) + JSON (the rest). `set_state()` restores it exactly, including
        the random generator, so the restored buffer draws the same samples.
        """
        size = len(self)
        cols = self._columns or {}
        lane_keys = np.fromiter(self._lane_tail.keys(), dtype=np.int64, count=len(self._lane_tail))
        lane_ids = np.fromiter(self._lane_tail.values(), dtype=np.int64, count=len(self._lane_tail))
        return {
            "type": type(self).__name__,
            "version": STATE_VERSION,
            "capacity": self._capacity,
            "size": size,
            "next_index": self._num_added % self._capacity,
            "num_added": self._num_added,
            "storage_unit": self.storage_unit,
            "has_columns": self._columns is not None,
            "columns": {k: np.ascontiguousarray(v[:size]) for k, v in cols.items()},
            # dtype and per-row shape survive serialisers that turn arrays into nested lists.
            "column_dtypes": {k: str(v.dtype) for k, v in cols.items()},
            "column_shapes": {k: np.asarray(v.shape[1:], dtype=np.int64) for k, v in cols.items()},
            "next_id": np.ascontiguousarray(self._next_id[:size]),
            "lane_keys": lane_keys,
            "lane_last_ids": lane_ids,
            "rng_state": _encode_rng_state(self._rng.bit_generator.state),
        }

    _STATE_KEYS = (
        "type", "capacity", "size", "next_index", "num_added", "storage_unit", "has_columns", "columns",
        "column_dtypes", "column_shapes", "next_id", "lane_keys", "lane_last_ids", "rng_state",
    )

    def _check_state_keys(self, state: Any) -> None:
        if not isinstance(state, Mapping):
            raise ValueError(f"replay buffer state must be a dict, got {type(state).__name__}.")
        if "type" in state and state["type"] != type(self).__name__:
            raise ValueError(f"replay buffer state key 'type' is {state['type']!r}, expected {type(self).__name__!r}.")
        for key in self._STATE_KEYS:
            if key not in state:
                raise ValueError(f"replay buffer state is missing key {key!r}.")

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state()` dict (also after a msgpack/JSON round trip); validates it first."""
        self._check_state_keys(state)
        capacity = _as_int(state["capacity"], "capacity")
        if capacity != self._capacity:
            raise ValueError(f"replay buffer state key 'capacity' is {capacity}, but this buffer has {self._capacity}.")
        num_added = _as_int(state["num_added"], "num_added")
        size = _as_int(state["size"], "size")
        if num_added < 0 or size != min(num_added, capacity):
            raise ValueError(f"replay buffer state key 'size' ({size}) does not match num_added ({num_added}).")
        if _as_int(state["next_index"], "next_index") != num_added % capacity:
            raise ValueError("replay buffer state key 'next_index' does not match num_added.")
        storage_unit = StorageUnit.validate(state["storage_unit"])

        columns = None
        if state["has_columns"]:
            columns = {}
            for key in ("columns", "column_dtypes", "column_shapes"):
                if not isinstance(state[key], Mapping):
                    raise ValueError(f"replay buffer state key {key!r} must be a dict.")
            for name, data in state["columns"].items():
                if name not in state["column_dtypes"] or name not in state["column_shapes"]:
                    raise ValueError(f"replay buffer state key 'column_dtypes'/'column_shapes' lacks column {name!r}.")
                dtype = np.dtype(state["column_dtypes"][name])
                if dtype.kind not in "biuf":
                    raise ValueError(f"replay buffer state key 'column_dtypes' gives {name!r} the dtype {dtype}.")
                shape = (size,) + tuple(int(d) for d in state["column_shapes"][name])
                arr = np.asarray(data, dtype=dtype)
                if arr.size != int(np.prod(shape)):
                    raise ValueError(
                        f"replay buffer state key 'columns' has {name!r} of shape {arr.shape}, expected {shape}."
                    )
                store = np.zeros((capacity,) + shape[1:], dtype=dtype)
                store[:size] = arr.reshape(shape)
                columns[name] = store
        next_id = np.asarray(state["next_id"], dtype=np.int64).reshape(-1)
        if next_id.shape != (size,):
            raise ValueError(f"replay buffer state key 'next_id' has {next_id.size} entries, expected {size}.")
        lane_keys = np.asarray(state["lane_keys"], dtype=np.int64).reshape(-1)
        lane_ids = np.asarray(state["lane_last_ids"], dtype=np.int64).reshape(-1)
        if lane_keys.shape != lane_ids.shape:
            raise ValueError("replay buffer state keys 'lane_keys' and 'lane_last_ids' differ in length.")
        rng_state = _decode_rng_state(state["rng_state"])
        name = rng_state.get("bit_generator") if isinstance(rng_state, dict) else None
        if name not in _BIT_GENERATORS:
            raise ValueError(f"replay buffer state key 'rng_state' names an unknown bit generator {name!r}.")
        rng = np.random.Generator(getattr(np.random, name)())
        try:
            rng.bit_generator.state = rng_state
        except (TypeError, KeyError, ValueError) as err:
            raise ValueError(f"replay buffer state key 'rng_state' is not a valid {name} state: {err}") from err

        self._columns = columns
        self._next_id = np.full(capacity, -1, dtype=np.int64)
        self._next_id[:size] = next_id
        self._num_added = num_added
        self._lane_tail = dict(zip(lane_keys.tolist(), lane_ids.tolist()))
        self.storage_unit = storage_unit
        self._rng = rng
