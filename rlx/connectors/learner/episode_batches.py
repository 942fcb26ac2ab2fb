"""Train batches from episodes: what `Learner.update(episodes=...)` and
`LearnerGroup.update(episodes=...)` train on (RLlib's new-stack update input).

RLlib's default learner connector pieces (observations, actions, rewards and model outputs
from the episodes, batched per module) are one function here, `episodes_to_module_batches`:
it lays each module's episodes out as rlx's time-major train batch ([T, B] arrays, one
episode per column, zero-padded, VALID marking real rows), which is the batch rlx's learner
connector pieces already run on (their episodes are views over it,
rlx.connectors.learner.batch_episodes). `flatten_valid_rows` then keeps the real rows, in
episode order, as the flat batch a loss reads.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from rlx.connectors.connector_v2 import batch_items_to_array
from rlx.core import DEFAULT_MODULE_ID
from rlx.core.columns import Columns


def single_agent_episodes(episodes: Iterable[Any]) -> Iterator[tuple[str, Any]]:
    """(module id, single-agent episode) for each episode; a multi-agent episode gives each of
    its agents' episodes with the module its agent maps to."""
    for episode in episodes:
        agent_episodes = getattr(episode, "agent_episodes", None)
        if isinstance(agent_episodes, dict):
            for agent_id, sa_episode in agent_episodes.items():
                module_id = sa_episode.module_id or episode.module_for(agent_id)
                if module_id is None:
                    raise ValueError(f"Agent {agent_id!r} of episode {episode.id_!r} maps to no module: the "
                                     "episode's agent_to_module_map has no entry for it.")
                yield str(module_id), sa_episode
        else:
            yield str(getattr(episode, "module_id", None) or DEFAULT_MODULE_ID), episode


def _columns(episode: Any) -> dict[str, Any]:
    """One episode's rows: every step's observation, next observation, action, reward, end flags
    and extra model outputs."""
    n = len(episode)
    observations = list(episode.get_observations())
    if len(observations) != n + 1:
        raise ValueError(f"Episode {episode.id_!r} has {len(observations)} observations for {n} steps "
                         f"(expected {n + 1}); episodes handed to update() must be complete chunks.")
    terminateds = np.zeros(n, dtype=bool)
    truncateds = np.zeros(n, dtype=bool)
    if n:
        terminateds[-1] = bool(episode.is_terminated)
        truncateds[-1] = bool(episode.is_truncated)
    columns = {
        Columns.OBS: batch_items_to_array(observations[:-1]),
        Columns.NEXT_OBS: batch_items_to_array(observations[1:]),
        Columns.ACTIONS: batch_items_to_array(list(episode.get_actions())),
        Columns.REWARDS: np.asarray(episode.get_rewards(), dtype=np.float32),
        Columns.TERMINATEDS: terminateds,
        Columns.TRUNCATEDS: truncateds,
    }
    for key in episode.extra_model_outputs:
        values = list(episode.get_extra_model_outputs(key))
        if len(values) == n:
            columns[key] = batch_items_to_array(values)
    return columns


def _pad_time_major(per_episode: list[dict[str, Any]], lengths: list[int]) -> dict[str, Any]:
    """[T, B, ...] arrays (one column per episode, zero-padded to the longest) plus VALID."""
    T, B = max(lengths), len(lengths)
    out: dict[str, Any] = {}
    for key in per_episode[0]:
        def pad(values: list[np.ndarray]) -> np.ndarray:
            first = np.asarray(values[0])
            array = np.zeros((T, B) + first.shape[1:], dtype=first.dtype)
            for b, value in enumerate(values):
                array[:len(value), b] = value
            return array

        items = [cols[key] for cols in per_episode]
        if isinstance(items[0], dict):
            out[key] = {k: pad([it[k] for it in items]) for k in items[0]}
        else:
            out[key] = pad(items)
    valid = np.zeros((T, B), dtype=bool)
    for b, n in enumerate(lengths):
        valid[:n, b] = True
    out[Columns.VALID] = valid
    return out


def episodes_to_module_batches(episodes: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """{module_id: time-major train batch} of `episodes` (SingleAgentEpisodes, whose module is
    DEFAULT_MODULE_ID unless they name one, and/or MultiAgentEpisodes). Empty episodes are left out."""
    grouped: dict[str, list[Any]] = {}
    for module_id, episode in single_agent_episodes(episodes):
        if len(episode) > 0:
            grouped.setdefault(module_id, []).append(episode)
    return {mid: _pad_time_major([_columns(e) for e in eps], [len(e) for e in eps]) for mid, eps in grouped.items()}


def flatten_valid_rows(batch: dict[str, Any]) -> dict[str, Any]:
    """The real (VALID) rows of a time-major [T, B] batch as a flat batch, episode by episode;
    a batch without VALID is returned as it is."""
    valid = batch.get(Columns.VALID)
    if valid is None:
        return batch
    mask = np.asarray(valid, dtype=bool).T  # [B, T]: episode-major order

    def flat(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: flat(v) for k, v in value.items()}
        array = np.asarray(value)
        if array.ndim < 2 or array.shape[:2] != valid.shape:
            return value
        return np.swapaxes(array, 0, 1)[mask]

    return {key: flat(value) for key, value in batch.items() if key != Columns.VALID}
