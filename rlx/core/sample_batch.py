"""The batch types: SampleBatch (a dict of equally long column arrays), MultiAgentBatch
(per-module time-major batches with their env and agent step counts) and `concat_samples`.

RLlib's path for them is `ray.rllib.policy.sample_batch`, which rlx keeps as an alias
(`rlx.policy.sample_batch`). rlx trains on time-major dicts of arrays; a SampleBatch is what
old-API callbacks such as `on_postprocess_trajectory` receive for one stretch of one episode.

Both types answer the same questions, so the core path never asks which one it holds:
`env_steps()`, `agent_steps()`, `as_multi_agent()` (the per-module view every consumer works
on: a MultiAgentBatch is its own, a SampleBatch is the batch of one module), and the joins
`concat_time` / `join_side_by_side`. What a single-agent EnvRunner samples is a plain dict of
`[T, C]` columns; the module functions `as_multi_agent`, `concat_time` and `join_side_by_side`
take it as well.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rlx.core.columns import Columns

DEFAULT_POLICY_ID = "default_policy"

__all__ = ["DEFAULT_POLICY_ID", "MultiAgentBatch", "SampleBatch", "as_multi_agent", "batch_kind", "concat_samples",
           "concat_time", "join_side_by_side", "join_time_major", "map_modules"]


class SampleBatch(dict):
    """A dict of columns (NumPy arrays of equal length); `len(batch)` is the number of rows."""

    OBS = Columns.OBS
    NEXT_OBS = Columns.NEXT_OBS
    ACTIONS = Columns.ACTIONS
    REWARDS = Columns.REWARDS
    TERMINATEDS = Columns.TERMINATEDS
    TRUNCATEDS = Columns.TRUNCATEDS
    DONES = "dones"
    INFOS = "infos"
    EPS_ID = "eps_id"
    ENV_ID = "env_id"
    T = "t"
    ACTION_LOGP = Columns.ACTION_LOGP
    ACTION_DIST_INPUTS = Columns.ACTION_DIST_INPUTS
    VF_PREDS = Columns.VF_PREDS
    ADVANTAGES = Columns.ADVANTAGES
    VALUE_TARGETS = Columns.VALUE_TARGETS

    @property
    def count(self) -> int:
        """Number of rows (the length of the first column)."""
        for value in self.values():
            return len(value)
        return 0

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return dict.__len__(self) > 0

    def copy(self, shallow: bool = False) -> "SampleBatch":
        """A copy; the columns are copied too unless `shallow`."""
        if shallow:
            return SampleBatch(dict(self))
        return SampleBatch({k: np.array(v, copy=True) for k, v in self.items()})

    def env_steps(self) -> int:
        """Env steps this batch holds: the valid rows of a time-major `[T, C]` batch (`valid.sum()`
        with a `valid` column, else `rewards.size`), the rows of a flat one.

        RLlib's SampleBatch is flat, so its `env_steps()` is `len(batch)`; rlx's time-major batch
        counts `T * C` steps where `len(batch)` is `T`.
        """
        return _num_rows(self)

    def agent_steps(self) -> int:
        """Agent steps this batch holds: one agent acts per step, so the same as `env_steps()`."""
        return _num_rows(self)

    def as_multi_agent(self, module_id: str | None = None) -> "MultiAgentBatch":
        """This batch as the one module's batch of a MultiAgentBatch (`module_id`, by default
        'default_policy'); the columns are not copied."""
        steps = _num_rows(self)  # (also called on a plain dict of columns, see `as_multi_agent`)
        return MultiAgentBatch({module_id or DEFAULT_POLICY_ID: self}, steps, steps)

    def map_modules(self, fn: Callable[[Any], Any]) -> Any:
        """`fn(self)`: this batch is its one module's columns (see MultiAgentBatch.map_modules)."""
        return fn(self)

    @classmethod
    def concat_time(cls, batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Join time-major batches of the same sub-envs along the time axis (`join_time_major`
        axis 0); the result has the type of the first batch (a plain dict stays one)."""
        return _like(batches[0], join_time_major(list(batches), axis=0))

    @classmethod
    def join_side_by_side(cls, batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Join time-major batches of different runners along the column axis (shorter ones are
        padded with rows marked invalid); the result has the type of the first batch."""
        return _like(batches[0], join_time_major(list(batches), axis=1))

    def concat(self, other: "SampleBatch") -> "SampleBatch":
        """This batch's rows followed by `other`'s (RLlib's `SampleBatch.concat`)."""
        return concat_samples([self, other])

    def rows(self) -> Any:
        """Iterate over rows as dicts {column: value}."""
        for i in range(self.count):
            yield {k: v[i] for k, v in self.items()}

    def __repr__(self) -> str:
        return f"SampleBatch({self.count} rows: {', '.join(self.keys())})"


def concat_samples(batches: list[Any]) -> Any:
    """Concatenate SampleBatches with the same columns row-wise; MultiAgentBatches of flat
    SampleBatches policy by policy (their step counts added up)."""
    if not batches:
        return SampleBatch()
    if isinstance(batches[0], MultiAgentBatch):
        policies = dict.fromkeys(pid for b in batches for pid in b.policy_batches)
        return MultiAgentBatch({pid: concat_samples([b.policy_batches[pid] for b in batches if pid in b])
                                for pid in policies}, sum(b.count for b in batches),
                               sum(b.agent_steps() for b in batches))
    keys = list(batches[0].keys())
    return SampleBatch({k: np.concatenate([np.asarray(b[k]) for b in batches]) for k in keys})


class MultiAgentBatch:
    """Per-policy time-major batches of one sampling round (`ray.rllib.policy.sample_batch.MultiAgentBatch`).

    `policy_batches[policy_id]` is a dict of `[T, C, ...]` arrays: the C columns are the (sub-env,
    agent) slots mapped to that policy, each slot one agent's steps in order; rows a slot did not
    fill are marked False in its `valid` column. `count` (= `env_steps()`) counts env steps,
    `agent_steps()` the actions of all agents.
    """

    def __init__(self, policy_batches: dict[str, dict[str, np.ndarray]], env_steps: int,
                 agent_steps: int | None = None):
        self.policy_batches = policy_batches
        self.count = int(env_steps)
        self._agent_steps = int(agent_steps) if agent_steps is not None else \
            sum(_num_rows(b) for b in policy_batches.values())

    def env_steps(self) -> int:
        """Env steps this batch holds."""
        return self.count

    def agent_steps(self) -> int:
        """Agent steps (actions of all agents) this batch holds."""
        return self._agent_steps

    def __getitem__(self, policy_id: str) -> dict[str, np.ndarray]:
        return self.policy_batches[policy_id]

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self.policy_batches

    def __iter__(self) -> Any:
        return iter(self.policy_batches)

    def items(self) -> Any:
        """(policy_id, batch) pairs."""
        return self.policy_batches.items()

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        inner = ", ".join(f"{pid}: {_num_rows(b)} steps" for pid, b in self.policy_batches.items())
        return f"MultiAgentBatch({{{inner}}}, env_steps={self.count})"

    def as_multi_agent(self, module_id: str | None = None) -> "MultiAgentBatch":
        """This batch itself (already per module; `module_id` is for SampleBatch's signature)."""
        return self

    def map_modules(self, fn: Callable[[Any], Any]) -> "MultiAgentBatch":
        """A MultiAgentBatch of `fn(columns)` for every module's columns, with this batch's step counts."""
        return MultiAgentBatch({pid: fn(b) for pid, b in self.policy_batches.items()}, self.count, self._agent_steps)

    @classmethod
    def concat_time(cls, batches: list["MultiAgentBatch"]) -> "MultiAgentBatch":
        """Join batches of the same runner along the time axis (slots that appeared later pad the
        earlier batches with invalid columns)."""
        return MultiAgentBatch._join(batches, axis=0)

    @classmethod
    def join_side_by_side(cls, batches: list["MultiAgentBatch"]) -> "MultiAgentBatch":
        """Join batches of different runners along the column axis."""
        return MultiAgentBatch._join(batches, axis=1)

    @staticmethod
    def _join(batches: list["MultiAgentBatch"], axis: int) -> "MultiAgentBatch":
        if len(batches) == 1:
            return batches[0]
        out = {pid: join_time_major([b.policy_batches[pid] for b in batches if pid in b.policy_batches], axis)
               for pid in dict.fromkeys(p for b in batches for p in b.policy_batches)}
        return MultiAgentBatch(out, sum(b.count for b in batches), sum(b.agent_steps() for b in batches))


def as_multi_agent(batch: Any, module_id: str = DEFAULT_POLICY_ID) -> MultiAgentBatch:
    """`batch` as per-module batches: a MultiAgentBatch itself, a SampleBatch or a plain dict of
    time-major columns (what a single-agent EnvRunner samples) as the batch of `module_id`, with
    its step counts. The columns are not copied."""
    to_multi_agent = getattr(batch, "as_multi_agent", None)
    if to_multi_agent is not None:
        return to_multi_agent(module_id)
    return SampleBatch.as_multi_agent(batch, module_id)  # (a plain dict: the same view)


def batch_kind(batch: Any) -> type[SampleBatch] | type[MultiAgentBatch]:
    """The batch type whose methods handle `batch`: MultiAgentBatch or SampleBatch (also for a
    plain dict of columns)."""
    kind: type[SampleBatch] | type[MultiAgentBatch] = type(batch)
    return kind if hasattr(kind, "concat_time") else SampleBatch


def map_modules(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """`batch` with every module's columns replaced by `fn(columns)`: a MultiAgentBatch stays one
    (with its step counts), a single module's columns (SampleBatch or plain dict) become fn's result."""
    return batch_kind(batch).map_modules(batch, fn)


def concat_time(batches: list[Any]) -> Any:
    """Join batches of the same runner along the time axis, whichever type they are."""
    return batch_kind(batches[0]).concat_time(batches)


def join_side_by_side(batches: list[Any]) -> Any:
    """Join batches of different runners along the column axis, whichever type they are."""
    return batch_kind(batches[0]).join_side_by_side(batches)


def _like(template: Any, joined: dict[str, np.ndarray]) -> Any:
    """`joined` as the type of `template` (a SampleBatch stays one, a plain dict stays a dict)."""
    return joined if type(joined) is type(template) or type(template) is dict else type(template)(joined)


def join_time_major(parts: list[dict[str, np.ndarray]], axis: int) -> dict[str, np.ndarray]:
    """Join one module's time-major [T, C, ...] batches along `axis`: 0 (time: later fragments of
    the same columns) or 1 (columns: other sub-envs or runners side by side). The single join of
    time-major batches, single- and multi-agent alike.

    A part shorter along the other axis is padded with zero rows marked invalid. `valid` (True
    for real rows) is in the result when a part has one or padding was needed, else left out
    (every row is real).
    """
    if len(parts) == 1:
        return parts[0]
    other = 1 - axis
    size = max(p[Columns.REWARDS].shape[other] for p in parts)
    if any(Columns.VALID in p for p in parts) or any(p[Columns.REWARDS].shape[other] != size for p in parts):
        parts = [_pad_axis(_with_valid(p), other, size) for p in parts]
    return {k: np.concatenate([p[k] for p in parts], axis=axis) for k in parts[0]}


def _num_rows(batch: dict[str, np.ndarray]) -> int:
    valid = batch.get(Columns.VALID)
    if valid is not None:
        return int(valid.sum())
    if Columns.REWARDS in batch:
        return int(batch[Columns.REWARDS].size)
    # A batch of other columns (supervised data, e.g. the meta learner's): rows of its first column.
    return len(next(iter(batch.values()))) if len(batch) else 0


def _with_valid(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if Columns.VALID not in batch:
        batch = dict(batch)
        batch[Columns.VALID] = np.ones(batch[Columns.REWARDS].shape, dtype=bool)
    return batch


def _pad_axis(batch: dict[str, np.ndarray], axis: int, size: int) -> dict[str, np.ndarray]:
    """Pad every column with zeros (and `valid` False) along `axis` (0: time, 1: columns) to `size`."""
    current = batch[Columns.REWARDS].shape[axis]
    if current == size:
        return batch
    batch = _with_valid(batch)
    out = {}
    for key, value in batch.items():
        shape = list(value.shape)
        shape[axis] = size - current
        out[key] = np.concatenate([value, np.zeros(shape, dtype=value.dtype)], axis=axis)
    return out
