"""What offline batches must look like to train the Algorithm's policies, checked per record.

Observations in offline files are what the policy saw: preprocessed (flattened, one-hot)
and filtered, as rlx writes them. Actions are the module's actions: Discrete ones as
integers from 0, Box ones (normalized to [-1, 1] when `normalize_actions`, unless the
reader normalizes them, see `actions_in_input_normalized`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.core.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch, batch_kind
from rlx.utils.errors import RLXError

#: Columns every offline record needs to train on.
REQUIRED_COLUMNS = (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS, Columns.TERMINATEDS)


class OfflineDataError(RLXError, ValueError):
    """Offline data that cannot be read or does not fit the Algorithm (names the file and line)."""


@dataclass(frozen=True)
class PolicySpaces:
    """The observation row shape and the action adapter (rlx.env.env_runner.ActionAdapter) of one policy."""

    obs_shape: tuple
    obs_space: Any
    actions: Any


def spaces_of(worker: Any) -> dict[str, PolicySpaces]:
    """{policy id: PolicySpaces} of an EnvRunner (single-agent: one 'default_policy' entry)."""
    slots = getattr(worker, "slots", None)
    if isinstance(slots, dict):
        return {pid: PolicySpaces(tuple(s.module_observation_space.shape), s.module_observation_space, s.actions)
                for pid, s in slots.items()}
    space = worker.module_observation_space
    return {DEFAULT_POLICY_ID: PolicySpaces(tuple(space.shape), space, worker.actions)}


def policy_batches(batch: Any, spaces: dict[str, PolicySpaces], where: str) -> dict[str, SampleBatch]:
    """{policy id: SampleBatch} of a record, its policies matched against the Algorithm's."""
    if batch_kind(batch) is MultiAgentBatch:
        out = {str(pid): b for pid, b in batch.policy_batches.items()}
        unknown = [pid for pid in out if pid not in spaces]
        if unknown:
            raise OfflineDataError(f"{where}: the record holds policy id(s) {unknown}, but the Algorithm's policies "
                                   f"are {sorted(spaces)}. Configure the same policies as the run that wrote it.")
        return out
    if not isinstance(batch, dict):
        raise OfflineDataError(f"{where}: an input reader returned a {type(batch).__name__}; it must return a "
                               "SampleBatch or a MultiAgentBatch.")
    if len(spaces) != 1:
        raise OfflineDataError(f"{where}: the record is a single-agent SampleBatch, but the Algorithm has several "
                               f"policies ({sorted(spaces)}); multi-agent input must be MultiAgentBatch records.")
    return {next(iter(spaces)): batch}


def check_batch(batch: Any, spaces: dict[str, PolicySpaces], where: str) -> None:
    """Raise OfflineDataError (naming `where`) when `batch` lacks a required column or its
    observations or actions do not fit the policies' spaces."""
    for pid, columns in policy_batches(batch, spaces, where).items():
        label = where if len(spaces) == 1 else f"{where} (policy {pid!r})"
        _check_policy_batch(columns, spaces[pid], label)


def _check_policy_batch(columns: Any, spec: PolicySpaces, where: str) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise OfflineDataError(f"{where}: missing column(s) {missing}; offline records need {list(REQUIRED_COLUMNS)} "
                               "(terminateds may be given under its old name 'dones').")
    for name in (Columns.OBS, Columns.NEXT_OBS):
        array = np.asarray(columns[name])
        if array.dtype.kind not in "biuf":
            raise OfflineDataError(f"{where}: column {name!r} holds {array.dtype} values; observations must be numbers.")
        if tuple(array.shape[1:]) != spec.obs_shape:
            raise OfflineDataError(
                f"{where}: column {name!r} has rows of shape {tuple(array.shape[1:])}, but the policy's observations "
                f"have shape {spec.obs_shape} ({spec.obs_space}, after preprocessing). The data was written for "
                "another env or model settings.")
    _check_actions(np.asarray(columns[Columns.ACTIONS]), spec.actions, where)


def _check_actions(actions: np.ndarray, adapter: Any, where: str) -> None:
    space = adapter.space
    expected = tuple(adapter.batch_shape)
    if actions.dtype.kind not in "biuf":
        raise OfflineDataError(f"{where}: column 'actions' holds {actions.dtype} values; actions must be numbers.")
    if tuple(actions.shape[1:]) != expected:
        raise OfflineDataError(f"{where}: column 'actions' has rows of shape {tuple(actions.shape[1:])}, but the "
                               f"action space {space} needs {expected}.")
    if adapter.is_discrete and actions.size:
        if actions.dtype.kind == "f" and not np.all(np.mod(actions, 1) == 0):
            raise OfflineDataError(f"{where}: column 'actions' holds fractional values for the discrete action "
                                   f"space {space}.")
        low, high = int(actions.min()), int(actions.max())
        if low < 0 or high >= int(space.n):
            raise OfflineDataError(f"{where}: column 'actions' holds values from {low} to {high}, outside the action "
                                   f"space {space} (rlx stores Discrete actions counted from 0).")
