"""Episode views over a train batch, so learner connector pieces written for RLlib's episodes
work on rlx's batches: reading an episode reads the batch, and changing it writes the batch."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from rlx.connectors.episode_indexing import select_items
from rlx.core.columns import Columns

_NO_FILL = object()


class BatchEpisode:
    """One episode stretch of one column of a time-major train batch ([T, B, ...] arrays), or
    one row of a flat batch ([N, ...], each row its own one-step stretch).

    Observations are the stretch's OBS rows plus the NEXT_OBS of its last row (len + 1 items,
    as in a SingleAgentEpisode); actions, rewards and extra model outputs (action_logp,
    action_dist_inputs, vf_preds, ...) are its rows of those columns.
    """

    def __init__(self, batch: dict[str, Any], rows: slice, column: int | None, episode_id: str,
                 agent_id: Any = None, module_id: Any = None):
        self._batch = batch
        self._rows = rows
        self._col = column
        self.id_ = episode_id
        self.agent_id = agent_id
        self.module_id = module_id
        self.multi_agent_episode_id = None
        self.is_numpy = True
        self.t_started = 0
        self.observation_space = None
        self.action_space = None
        last = self._index(rows.stop - 1)
        self.is_terminated = bool(batch[Columns.TERMINATEDS][last]) if Columns.TERMINATEDS in batch else False
        self.is_truncated = bool(batch[Columns.TRUNCATEDS][last]) if Columns.TRUNCATEDS in batch else False

    def _index(self, t: int) -> Any:
        return (t,) if self._col is None else (t, self._col)

    def _column(self, name: str) -> np.ndarray:
        data = self._batch[name]
        return data[self._rows] if self._col is None else data[self._rows, self._col]

    def __len__(self) -> int:
        return self._rows.stop - self._rows.start

    @property
    def t(self) -> int:
        """Number of steps in the stretch."""
        return len(self)

    @property
    def is_done(self) -> bool:
        """Whether the stretch ends its episode."""
        return self.is_terminated or self.is_truncated

    # ------------------------------------------------------------------ reading

    def _observation_list(self) -> list[Any]:
        obs = self._column(Columns.OBS)
        items = [obs[i] for i in range(len(obs))]
        if Columns.NEXT_OBS in self._batch:
            items.append(self._batch[Columns.NEXT_OBS][self._index(self._rows.stop - 1)])
        return items

    def _get(self, items: list[Any], indices: Any, what: str, fill: Any, lookback: bool) -> Any:
        return select_items(items, indices, what, None if fill is _NO_FILL else fill, fill is not _NO_FILL,
                            lookback)

    def get_observations(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                         **kwargs: Any) -> Any:
        """Observations, indexed as SingleAgentEpisode.get_observations."""
        return self._get(self._observation_list(), indices, "observations", fill, neg_index_as_lookback)

    def get_actions(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                    **kwargs: Any) -> Any:
        """Actions, indexed as SingleAgentEpisode.get_actions."""
        actions = self._column(Columns.ACTIONS)
        return self._get([actions[i] for i in range(len(actions))], indices, "actions", fill, neg_index_as_lookback)

    def get_rewards(self, indices: Any = None, *, fill: Any = _NO_FILL, neg_index_as_lookback: bool = False,
                    **kwargs: Any) -> Any:
        """Rewards, indexed as SingleAgentEpisode.get_rewards."""
        rewards = self._column(Columns.REWARDS)
        return self._get([float(r) for r in rewards], indices, "rewards", fill, neg_index_as_lookback)

    def get_infos(self, indices: Any = None, **kwargs: Any) -> Any:
        """Infos (when the batch has an infos column), else empty dicts."""
        if Columns.INFOS in self._batch:
            infos = list(self._column(Columns.INFOS))
        else:
            infos = [{} for _ in range(len(self) + 1)]
        return select_items(infos, indices, "infos")

    def get_extra_model_outputs(self, key: str, indices: Any = None, **kwargs: Any) -> Any:
        """The batch column `key` over this stretch (action_logp, action_dist_inputs, ...)."""
        if key not in self._batch:
            raise KeyError(f"The train batch has no column {key!r}; it has {sorted(self._batch)}.")
        values = self._column(key)
        return select_items([values[i] for i in range(len(values))], indices, f"extra model outputs {key!r}")

    def get_return(self) -> float:
        """Sum of the stretch's rewards."""
        return float(np.sum(self._column(Columns.REWARDS)))

    # ------------------------------------------------------------------ writing (into the batch)

    def _write(self, name: str, new_data: Any, at_indices: Any, offset: int = 0) -> None:
        data = self._batch[name]
        n = len(self)
        if at_indices is None:
            positions = list(range(len(new_data)))
            values = list(new_data)
        elif isinstance(at_indices, slice):
            positions = list(range(*at_indices.indices(n + offset)))
            values = list(new_data)
        elif isinstance(at_indices, (list, tuple)):
            positions, values = [int(i) for i in at_indices], list(new_data)
        else:
            positions, values = [int(at_indices)], [new_data]
        for i, value in zip(positions, values):
            i = i + n + offset if i < 0 else i
            try:
                data[self._index(self._rows.start + i)] = value
            except ValueError as err:
                raise ValueError(f"Cannot write {name!r} item of shape {np.shape(value)} into the train batch "
                                 f"column of item shape {data.shape[1 if self._col is None else 2:]}: {err}.") from err

    def set_rewards(self, *, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite rewards in the batch (indexed as SingleAgentEpisode.set_rewards)."""
        self._write(Columns.REWARDS, new_data, at_indices)

    def set_actions(self, *, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite actions in the batch."""
        self._write(Columns.ACTIONS, new_data, at_indices)

    def set_observations(self, *, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite observations: index len(self) (or -1) is the last row's next observation."""
        n = len(self)
        if at_indices is None:
            items = list(new_data)
            positions = list(range(len(items)))
        elif isinstance(at_indices, (list, tuple, slice)):
            positions = list(range(*at_indices.indices(n + 1))) if isinstance(at_indices, slice) else \
                [int(i) for i in at_indices]
            items = list(new_data)
        else:
            positions, items = [int(at_indices)], [new_data]
        for i, value in zip(positions, items):
            i = i + n + 1 if i < 0 else i
            if i < n:
                self._write(Columns.OBS, [value], [i])
            if i > 0 and Columns.NEXT_OBS in self._batch:
                self._write(Columns.NEXT_OBS, [value], [i - 1])

    def set_extra_model_outputs(self, *, key: str, new_data: Any, at_indices: Any = None, **kwargs: Any) -> None:
        """Overwrite the batch column `key` over this stretch."""
        self._write(key, new_data, at_indices)

    def add_batch_items(self, batch: dict[str, Any], column: str, items: Any, num_items: int) -> None:
        """Write `num_items` items (batched) into this stretch's rows of `batch[column]`, creating the
        column when new. Used by ConnectorV2.add_batch_item / add_n_batch_items."""
        items = np.asarray(items)
        if num_items == 1 and len(self) == 1 and (items.ndim == 0 or items.shape[0] != 1):
            items = items[None]
        if items.shape[0] != len(self):
            raise ValueError(f"add_n_batch_items: {items.shape[0]} items for column {column!r}, but the episode "
                             f"stretch has {len(self)} steps in rlx's train batch (one item per step).")
        if column not in batch:
            lead = batch[Columns.REWARDS].shape
            batch[column] = np.zeros(lead + items.shape[1:], dtype=items.dtype)
        rows = self._rows if self._col is None else (self._rows, self._col)
        try:
            batch[column][rows] = items
        except ValueError as err:
            raise ValueError(f"Cannot write items of shape {items.shape[1:]} into train batch column {column!r} "
                             f"(shape {batch[column].shape}): {err}.") from err

    def __repr__(self) -> str:
        return f"BatchEpisode(rows={self._rows.start}:{self._rows.stop}, column={self._col}, len={len(self)})"


def batch_episodes(batch: dict[str, Any], module_id: Any = None) -> list[BatchEpisode]:
    """The episode stretches of a train batch: per column of a time-major batch, split after
    each terminated/truncated row and at rows marked invalid; one per row of a flat batch."""
    rewards = np.asarray(batch[Columns.REWARDS])
    if rewards.ndim == 1:
        return [BatchEpisode(batch, slice(t, t + 1), None, f"{module_id}:{t}", module_id=module_id)
                for t in range(rewards.shape[0])]
    T, B = rewards.shape[:2]
    ends = np.zeros((T, B), dtype=bool)
    for key in (Columns.TERMINATEDS, Columns.TRUNCATEDS):
        if key in batch:
            ends |= np.asarray(batch[key], dtype=bool)
    valid = np.asarray(batch[Columns.VALID], dtype=bool) if Columns.VALID in batch else None
    out = []
    for b in range(B):
        for start, stop in _stretches(ends[:, b], None if valid is None else valid[:, b]):
            out.append(BatchEpisode(batch, slice(start, stop), b, f"{module_id}:{b}:{start}", module_id=module_id))
    return out


def _stretches(ends: np.ndarray, valid: np.ndarray | None) -> Iterator[tuple[int, int]]:
    start = None
    for t in range(len(ends)):
        if valid is not None and not valid[t]:
            if start is not None:
                yield start, t
                start = None
            continue
        if start is None:
            start = t
        if ends[t]:
            yield start, t + 1
            start = None
    if start is not None:
        yield start, len(ends)
