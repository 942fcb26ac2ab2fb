"""Multi-agent replay: RLlib's `replay_mode="independent"` and `replay_mode="lockstep"`.

- "independent" (`MultiAgentReplayBuffer`): each policy's transitions go to its own buffer, built
  from the same `replay_buffer_config` when the policy first adds data, and each policy replays
  its own train batches.
- "lockstep" (`LockstepReplayBuffer`, RLlib's old MultiAgentReplayBuffer in lockstep mode): the
  item stored and sampled is one env step of one episode, with the transitions of every agent
  that acted in it. A replayed batch of N env steps holds, for each policy, the rows of its agents
  in exactly those env steps, so all policies train on the same timesteps. The EnvRunner tags
  each row with the env step it acted in (`eps_id`, `t` columns) when the config asks for
  lockstep replay (`needs_env_step_columns`).

RLlib's rules for lockstep hold (checked when the Algorithm is built, `check_lockstep_settings`):
no prioritized replay (items are replayed uniformly) and no sequence replay (recurrent models).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from rlx.core.columns import Columns
from rlx.core.sample_batch import MultiAgentBatch
from rlx.utils.errors import ConfigError, did_you_mean
from rlx.utils.replay_buffers.replay_buffer import BATCH_INDEXES, ReplayBuffer, _decode_rng_state, _encode_rng_state

INDEPENDENT = "independent"
LOCKSTEP = "lockstep"
REPLAY_MODES = (INDEPENDENT, LOCKSTEP)


def check_replay_mode(name: str, value: Any) -> str:
    """`value` (a string or RLlib's ReplayMode enum member) as 'independent' or 'lockstep'."""
    text = getattr(value, "value", value)
    if text not in REPLAY_MODES:
        raise ConfigError(f"{name} must be 'independent' or 'lockstep', got {value!r}."
                          f"{did_you_mean(str(text), REPLAY_MODES)}")
    return str(text)


def replay_mode_of(config: Any) -> str:
    """The multi-agent replay mode of `config`: `replay_buffer_config['replay_mode']` (where RLlib
    2.x keeps it) or `multi_agent(replay_mode=...)` (the old place); ConfigError when they differ."""
    old = check_replay_mode("replay_mode", getattr(config, "replay_mode", INDEPENDENT) or INDEPENDENT)
    rb = getattr(config, "replay_buffer_config", None)
    if not isinstance(rb, Mapping) or rb.get("replay_mode") is None:
        return old
    new = check_replay_mode("replay_buffer_config['replay_mode']", rb["replay_mode"])
    if old != INDEPENDENT and new != old:
        raise ConfigError(f"multi_agent(replay_mode={old!r}) and replay_buffer_config['replay_mode']={new!r} "
                          "disagree; set the replay mode in one place (RLlib 2.x keeps it in replay_buffer_config).")
    return new


def needs_env_step_columns(config: Any) -> bool:
    """Whether a multi-agent EnvRunner of `config` tags rows with their env step (`eps_id`, `t`):
    for replay-based algorithms with replay_mode='lockstep'."""
    return getattr(config, "replay_buffer_config", None) is not None and replay_mode_of(config) == LOCKSTEP


def check_lockstep_settings(config: Any, prioritized: bool) -> None:
    """Raise ConfigError (at build) for settings RLlib refuses with replay_mode='lockstep'."""
    if replay_mode_of(config) != LOCKSTEP:
        return
    if prioritized:
        raise ConfigError(
            "replay_mode='lockstep' replays whole env steps uniformly, so it cannot use prioritized replay (RLlib: "
            "'Prioritized replay is not supported when replay_mode=lockstep'). Use a uniform buffer, e.g. "
            "replay_buffer_config={'type': 'MultiAgentReplayBuffer', 'capacity': ...}, or replay_mode='independent'.")
    if (getattr(config, "model", None) or {}).get("use_lstm"):
        raise ConfigError("replay_mode='lockstep' stores single env steps, not the sequences a recurrent model "
                          "(model use_lstm) replays (RLlib refuses lockstep with storage_unit 'sequences'). Use "
                          "replay_mode='independent' or turn use_lstm off.")
    overrides = getattr(config, "algorithm_config_overrides_per_module", None) or {}
    for module_id, values in overrides.items():
        clash = sorted(k for k in ("replay_buffer_config", "train_batch_size", "train_batch_size_per_learner")
                       if k in (values or {}))
        if clash:
            raise ConfigError(f"algorithm_config_overrides_per_module[{module_id!r}] sets {', '.join(clash)}, but "
                              "replay_mode='lockstep' keeps one replay of all policies and samples the same env steps "
                              "for each of them; set these options for the whole algorithm instead.")


class MultiAgentReplayBuffer:
    """{policy_id: ReplayBuffer}, each made by `make_buffer(policy_id)` on first use
    (replay_mode='independent')."""

    replay_mode = INDEPENDENT

    def __init__(self, make_buffer: Callable[[str], ReplayBuffer]):
        self._make_buffer = make_buffer
        self.replay_buffers: dict[str, ReplayBuffer] = {}

    def buffer(self, policy_id: str) -> ReplayBuffer:
        """The buffer of `policy_id` (created empty on first use)."""
        buf = self.replay_buffers.get(policy_id)
        if buf is None:
            buf = self.replay_buffers[policy_id] = self._make_buffer(policy_id)
        return buf

    def add(self, batch: Any, time_major: bool = True, lane_offset: int = 0) -> None:
        """Add each policy's batch of a MultiAgentBatch (or {policy_id: batch}) to its buffer
        (`lane_offset`: where its columns' lanes start, as in ReplayBuffer.add)."""
        for policy_id, policy_batch in getattr(batch, "policy_batches", batch).items():
            if lane_offset:
                self.buffer(policy_id).add(policy_batch, time_major=time_major, lane_offset=lane_offset)
            else:
                self.buffer(policy_id).add(policy_batch, time_major=time_major)

    def end_open_episodes(self) -> None:
        """End every open episode in every buffer (the runners restarted their episodes)."""
        for buf in self.replay_buffers.values():
            buf.end_open_episodes()

    def remove(self, policy_id: str) -> None:
        """Drop the buffer of a removed policy."""
        self.replay_buffers.pop(policy_id, None)

    def __len__(self) -> int:
        return sum(len(buf) for buf in self.replay_buffers.values())

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self.replay_buffers

    def get_state(self) -> dict[str, Any]:
        """{policy_id: buffer state}."""
        return {pid: buf.get_state() for pid, buf in self.replay_buffers.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore get_state() (buffers of policies not in `state` are left as they are)."""
        for pid, value in state.items():
            self.buffer(str(pid)).set_state(value)


_STEP_COLUMNS = (Columns.EPS_ID, Columns.T)
#: Draws of a sampled env step whose rows were overwritten before it is given up on.
_REDRAWS = 8


class LockstepReplayBuffer:
    """replay_mode='lockstep': env steps stored and sampled with every policy's rows at once.

    Each policy's rows live in its own uniform ReplayBuffer (made by `make_buffer(policy_id,
    row_capacity)` when the policy first adds data), which keeps the lanes and episode links that
    n-step returns follow. An item table maps each stored env step to its rows in every policy's
    buffer. `capacity` counts env steps, as RLlib's lockstep buffer does; a policy's buffer holds
    `capacity` times the rows its agents fill per env step (as first added), and an env step
    whose rows were overwritten (more agents per step later) is not replayed again.

    `sample(num_items)` draws `num_items` stored env steps uniformly with replacement and returns a
    MultiAgentBatch {policy_id: rows of that policy's agents in those env steps, in the order of
    the drawn steps} counting `num_items` env steps.
    """

    replay_mode = LOCKSTEP

    def __init__(self, make_buffer: Callable[[str, int], ReplayBuffer], capacity: int, seed: Any = None):
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ConfigError(f"replay buffer capacity must be a positive int, got {capacity!r}.")
        self._make_buffer = make_buffer
        self.capacity = int(capacity)
        self.replay_buffers: dict[str, ReplayBuffer] = {}
        # policy id -> [capacity, width] insert ids of the policy's rows of each stored env step (-1: none).
        self._item_rows: dict[str, np.ndarray] = {}
        self._num_items = 0  # env steps added over the buffer's lifetime
        self._oldest = 0  # the oldest env step that may still be replayed
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ adding

    def add(self, batch: Any, time_major: bool = True, lane_offset: int = 0) -> None:
        """Add a MultiAgentBatch (or {policy_id: time-major batch}) whose rows carry `eps_id` and
        `t` (the EnvRunner adds them for lockstep replay): each distinct (eps_id, t) becomes one
        stored env step holding the rows of every policy."""
        if not time_major:
            raise ValueError("LockstepReplayBuffer.add() takes the EnvRunner's time-major [T, C] batches.")
        policy_batches = dict(getattr(batch, "policy_batches", batch))
        keys, owners = [], []
        for policy_id, policy_batch in policy_batches.items():
            missing = [c for c in _STEP_COLUMNS if c not in policy_batch]
            if missing:
                raise ValueError(
                    f"The batch of policy {policy_id!r} has no {missing} columns: lockstep replay groups rows by the "
                    "env step they acted in, which EnvRunners record when the config sets replay_mode='lockstep'.")
            valid = policy_batch.get(Columns.VALID)
            eps, t = (np.asarray(policy_batch[c]) for c in _STEP_COLUMNS)
            keep = np.ones(eps.shape, bool) if valid is None else np.asarray(valid, bool)
            keys.append(np.stack([eps[keep], t[keep]], axis=1))  # time-major order, as ReplayBuffer writes them
            owners.append(policy_id)
        if not keys or not sum(len(k) for k in keys):
            return
        # One item per distinct env step, numbered in (eps_id, t) order (RLlib's timeslices order).
        steps, inverse = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        num_new = len(steps)
        first_id = self._num_items
        slots = (first_id + np.arange(num_new)) % self.capacity
        for table in self._item_rows.values():
            table[slots] = -1  # ring positions taken over by the new env steps
        start = 0
        for policy_id, policy_keys in zip(owners, keys):
            rows_items = inverse[start:start + len(policy_keys)]
            start += len(policy_keys)
            self._add_policy_rows(policy_id, policy_batches[policy_id], rows_items, num_new, slots, lane_offset)
        self._num_items += num_new
        self._drop_stale_items()

    def _add_policy_rows(self, policy_id: str, policy_batch: Mapping[str, Any], rows_items: np.ndarray,
                         num_new: int, slots: np.ndarray, lane_offset: int) -> None:
        per_item = np.bincount(rows_items, minlength=num_new)
        width = int(per_item.max()) if per_item.size else 0
        buf = self.replay_buffers.get(policy_id)
        if buf is None:
            buf = self.replay_buffers[policy_id] = self._make_buffer(policy_id, self.capacity * max(1, width))
        table = self._item_rows.get(policy_id)
        if table is None or table.shape[1] < width:
            grown = np.full((self.capacity, max(1, width)), -1, dtype=np.int64)
            if table is not None:
                grown[:, :table.shape[1]] = table
            table = self._item_rows[policy_id] = grown
        row_ids = buf.num_added + np.arange(len(rows_items), dtype=np.int64)
        # Each row's place among its env step's rows: rank within equal item numbers, in row order.
        order = np.argsort(rows_items, kind="stable")
        first_of_item = np.concatenate(([0], np.cumsum(per_item)[:-1]))
        rank = np.empty(len(rows_items), dtype=np.int64)
        rank[order] = np.arange(len(rows_items)) - first_of_item[rows_items[order]]
        table[slots[rows_items], rank] = row_ids
        data = {k: v for k, v in policy_batch.items() if k not in _STEP_COLUMNS}
        if lane_offset:
            buf.add(data, time_major=True, lane_offset=lane_offset)
        else:
            buf.add(data, time_major=True)

    def _stored(self, policy_id: str, row_ids: np.ndarray) -> np.ndarray:
        """Which of `row_ids` (-1: none) the policy's buffer still holds."""
        buf = self.replay_buffers[policy_id]
        return row_ids >= max(0, buf.num_added - buf.capacity)

    def _intact(self, items: np.ndarray) -> np.ndarray:
        """Whether each env step in `items` still has all its rows."""
        ok = np.ones(len(items), dtype=bool)
        slots = items % self.capacity
        for policy_id, table in self._item_rows.items():
            rows = table[slots]
            ok &= ((rows < 0) | self._stored(policy_id, rows)).all(axis=1)
        return ok

    def _drop_stale_items(self) -> None:
        self._oldest = max(self._oldest, self._num_items - self.capacity)
        while self._oldest < self._num_items and not self._intact(np.asarray([self._oldest]))[0]:
            self._oldest += 1

    def end_open_episodes(self) -> None:
        """End every open episode in every policy's buffer (the runners restarted their episodes)."""
        for buf in self.replay_buffers.values():
            buf.end_open_episodes()

    def remove(self, policy_id: str) -> None:
        """Forget a removed policy's rows (the env steps keep the other policies' rows)."""
        self.replay_buffers.pop(policy_id, None)
        self._item_rows.pop(policy_id, None)

    # ------------------------------------------------------------------ sampling

    def sample(self, num_items: int, *, n_step: int = 1, gamma: float = 0.99, beta: float | None = None) -> Any:
        """Draw `num_items` stored env steps uniformly with replacement; a MultiAgentBatch with each
        policy's rows of them (n-step returns as ReplayBuffer.sample builds them, `weights` ones and
        `batch_indexes` the rows in the policy's buffer). `beta` is accepted and ignored (uniform)."""
        if isinstance(num_items, bool) or int(num_items) != num_items or num_items < 1:
            raise ValueError(f"num_items must be a positive int, got {num_items!r}.")
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer: add() some env steps first.")
        items = self._rng.integers(self._oldest, self._num_items, size=int(num_items), dtype=np.int64)
        for _ in range(_REDRAWS):
            broken = ~self._intact(items)
            if not broken.any():
                break
            items[broken] = self._rng.integers(self._oldest, self._num_items, size=int(broken.sum()), dtype=np.int64)
        slots = items % self.capacity
        out = {}
        for policy_id, table in self._item_rows.items():
            rows = table[slots].reshape(-1)  # item by item, each item's rows in slot order
            rows = rows[(rows >= 0) & self._stored(policy_id, rows)]
            if not rows.size:
                continue
            buf = self.replay_buffers[policy_id]
            positions = rows % buf.capacity
            batch = buf._gather(positions, int(n_step), float(gamma))
            batch[Columns.WEIGHTS] = np.ones(len(positions), dtype=np.float32)
            batch[BATCH_INDEXES] = positions
            out[policy_id] = batch
        return MultiAgentBatch(out, int(num_items))

    def __len__(self) -> int:
        """Env steps that can be replayed."""
        return self._num_items - self._oldest

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self.replay_buffers

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """Every policy's buffer state, the env-step table and the sampling RNG (JSON-safe
        scalars and NumPy arrays, as ReplayBuffer.get_state)."""
        return {
            "replay_mode": LOCKSTEP,
            "capacity": self.capacity,
            "num_items": self._num_items,
            "oldest": self._oldest,
            "rng_state": _encode_rng_state(self._rng.bit_generator.state),
            "item_rows": {pid: np.ascontiguousarray(t) for pid, t in self._item_rows.items()},
            "row_capacity": {pid: buf.capacity for pid, buf in self.replay_buffers.items()},
            "buffers": {pid: buf.get_state() for pid, buf in self.replay_buffers.items()},
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore get_state()."""
        if not isinstance(state, Mapping) or state.get("replay_mode") != LOCKSTEP:
            raise ValueError("The replay buffer state is not a lockstep buffer's (replay_mode='lockstep'); it was "
                             "saved with another replay_mode.")
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"The lockstep replay buffer state has capacity {state['capacity']}, this buffer "
                             f"{self.capacity}.")
        buffers = {}
        for pid, buf_state in state["buffers"].items():
            buf = self._make_buffer(str(pid), int(state["row_capacity"][pid]))
            buf.set_state(buf_state)
            buffers[str(pid)] = buf
        tables = {}
        for pid, table in state["item_rows"].items():
            table = np.asarray(table, dtype=np.int64)
            if table.ndim != 2 or table.shape[0] != self.capacity:
                raise ValueError(f"The lockstep replay buffer state's env-step table of {pid!r} has shape "
                                 f"{table.shape}, expected ({self.capacity}, width).")
            tables[str(pid)] = table.copy()
        rng = np.random.default_rng()
        rng.bit_generator.state = _decode_rng_state(state["rng_state"])
        self.replay_buffers, self._item_rows, self._rng = buffers, tables, rng
        self._num_items, self._oldest = int(state["num_items"]), int(state["oldest"])
