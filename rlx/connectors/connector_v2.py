"""ConnectorV2: one piece of an env-to-module, module-to-env or learner connector pipeline.

A piece is a callable `piece(rl_module=..., batch=..., episodes=..., explore=..., shared_data=...,
metrics=...) -> batch` that may change the episodes (e.g. rewrite their latest observation) and
the batch, and that tells the pipeline how it changes the observation and action spaces
(`recompute_output_observation_space`). Where rlx calls each kind of pipeline, and what the batch
holds there, is in docs/connectors.md.
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Iterator

import gymnasium as gym
import numpy as np


def _episode_key(episode: Any) -> tuple:
    """The batch key RLlib gives an episode's items: (episode id,) for single-agent episodes,
    (multi-agent episode id, agent id, module id) for one agent of a multi-agent episode."""
    ma_id = getattr(episode, "multi_agent_episode_id", None)
    if ma_id is not None:
        return (ma_id, getattr(episode, "agent_id", None), getattr(episode, "module_id", None))
    return (episode.id_,)


class ConnectorV2(abc.ABC):
    """Base class of connector pieces; subclasses implement `__call__`.

    Args:
        input_observation_space: the observation space this piece receives (set by the pipeline
            it is added to when left None).
        input_action_space: the action space this piece receives.
    """

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, **kwargs: Any) -> None:
        self._observation_space: gym.Space | None = None
        self._action_space: gym.Space | None = None
        self._input_observation_space: gym.Space | None = None
        self._input_action_space: gym.Space | None = None
        self._ctor_kwargs = dict(kwargs)
        # The action space first: observation spaces may depend on it (prev-actions pieces).
        self.input_action_space = input_action_space
        self.input_observation_space = input_observation_space

    # ------------------------------------------------------------------ spaces

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        """The observation space this piece outputs for the given input spaces (default: unchanged)."""
        return input_observation_space

    def recompute_output_action_space(self, input_observation_space: gym.Space,
                                      input_action_space: gym.Space) -> gym.Space:
        """The action space this piece outputs for the given input spaces (default: unchanged)."""
        return input_action_space

    @property
    def observation_space(self) -> gym.Space | None:
        """The observation space this piece outputs."""
        return self._observation_space

    @property
    def action_space(self) -> gym.Space | None:
        """The action space this piece outputs."""
        return self._action_space

    @property
    def input_observation_space(self) -> gym.Space | None:
        """The observation space this piece receives; setting it recomputes the output spaces."""
        return self._input_observation_space

    @input_observation_space.setter
    def input_observation_space(self, value: gym.Space | None) -> None:
        self._input_observation_space = value
        if value is not None:
            self._observation_space = self.recompute_output_observation_space(value, self._input_action_space)
            if self._input_action_space is not None:
                self._action_space = self.recompute_output_action_space(value, self._input_action_space)

    @property
    def input_action_space(self) -> gym.Space | None:
        """The action space this piece receives; setting it recomputes the output action space."""
        return self._input_action_space

    @input_action_space.setter
    def input_action_space(self, value: gym.Space | None) -> None:
        self._input_action_space = value
        if value is not None:
            self._action_space = self.recompute_output_action_space(self._input_observation_space, value)

    # ------------------------------------------------------------------ the call

    @abc.abstractmethod
    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, metrics: Any = None,
                 **kwargs: Any) -> Any:
        """Change `episodes` and/or `batch` and return the batch."""

    # ------------------------------------------------------------------ helpers for subclasses

    @staticmethod
    def single_agent_episode_iterator(episodes: list[Any], agents_that_stepped_only: bool = True,
                                      zip_with_batch_column: Any = None) -> Iterator[Any]:
        """Each single-agent episode in `episodes`; for a multi-agent episode, each agent's
        episode (only the agents that got a new observation in the last step, by default).

        With `zip_with_batch_column` (a batch column: {episode key: [items]} or a list of items,
        one per episode), yields (items, episode) pairs instead.
        """
        def agent_episodes() -> Iterator[Any]:
            for episode in episodes:
                if isinstance(getattr(episode, "agent_episodes", None), dict):  # a MultiAgentEpisode
                    ids = episode.get_agents_that_stepped() if agents_that_stepped_only else \
                        list(episode.agent_episodes)
                    for aid in ids:
                        if aid in episode.agent_episodes:
                            yield episode.agent_episodes[aid]
                else:
                    yield episode

        if zip_with_batch_column is None:
            yield from agent_episodes()
            return
        column = zip_with_batch_column
        for i, sa_episode in enumerate(agent_episodes()):
            if isinstance(column, dict):
                yield column[_episode_key(sa_episode)], sa_episode
            else:
                yield column[i], sa_episode

    @staticmethod
    def add_batch_item(batch: dict[str, Any], column: str, item_to_add: Any,
                       single_agent_episode: Any = None) -> None:
        """Add one item to `batch[column]`: under the episode's key when an episode is given
        (RLlib's {(episode id,): [items]} layout), else appended to a plain list."""
        view_add = getattr(single_agent_episode, "add_batch_items", None)
        if view_add is not None:  # an rlx learner-side episode view writes into the train batch
            view_add(batch, column, item_to_add, 1)
            return
        if single_agent_episode is None:
            batch.setdefault(column, []).append(item_to_add)
            return
        batch.setdefault(column, {}).setdefault(_episode_key(single_agent_episode), []).append(item_to_add)

    @staticmethod
    def add_n_batch_items(batch: dict[str, Any], column: str, items_to_add: Any, num_items: int,
                          single_agent_episode: Any = None) -> None:
        """Add `num_items` items, given batched (leading dimension num_items, possibly nested),
        to `batch[column]` for `single_agent_episode`."""
        view_add = getattr(single_agent_episode, "add_batch_items", None)
        if view_add is not None:
            view_add(batch, column, items_to_add, num_items)
            return
        for i in range(int(num_items)):
            ConnectorV2.add_batch_item(batch, column, _index_structure(items_to_add, i), single_agent_episode)

    @staticmethod
    def foreach_batch_item_change_in_place(batch: dict[str, Any], column: str | list[str],
                                           func: Callable[..., Any]) -> None:
        """Replace every item of `batch[column]` (or of several columns) by
        `func(item, episode_id, agent_id, module_id)`."""
        for col in [column] if isinstance(column, str) else list(column):
            data = batch.get(col)
            if isinstance(data, dict):
                for key, items in data.items():
                    eps_id = key[0] if isinstance(key, tuple) else None
                    agent_id = key[1] if isinstance(key, tuple) and len(key) > 1 else None
                    module_id = key[2] if isinstance(key, tuple) and len(key) > 2 else None
                    if isinstance(items, list):
                        items[:] = [func(item, eps_id, agent_id, module_id) for item in items]
                    else:
                        data[key] = func(items, eps_id, agent_id, module_id)
            elif isinstance(data, list):
                data[:] = [func(item, None, None, None) for item in data]
            elif data is not None:
                batch[col] = func(data, None, None, None)

    @staticmethod
    def switch_batch_from_column_to_module_ids(batch: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """{column: {module_id: data}} -> {module_id: {column: data}}."""
        out: dict[str, dict[str, Any]] = {}
        for column, per_module in batch.items():
            for module_id, data in per_module.items():
                out.setdefault(module_id, {})[column] = data
        return out

    # ------------------------------------------------------------------ state

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict[str, Any]:
        """This piece's state (running statistics, counters); {} for stateless pieces."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from get_state()."""

    def reset_state(self) -> None:
        """Forget what was learned from data so far (stateless pieces: nothing)."""

    def merge_states(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        """One state from the states of several copies of this piece (one per EnvRunner)."""
        return states[0] if states else {}

    def get_ctor_args_and_kwargs(self) -> tuple[tuple, dict[str, Any]]:
        """The arguments to build a copy of this piece with."""
        return (), {"input_observation_space": self.input_observation_space,
                    "input_action_space": self.input_action_space, **self._ctor_kwargs}

    @property
    def name(self) -> str:
        """The piece's name in a pipeline: its class name."""
        return type(self).__name__

    def __str__(self, indentation: int = 0) -> str:
        return " " * indentation + type(self).__name__


def _index_structure(items: Any, i: int) -> Any:
    """Item i of a batched (possibly nested dict/tuple) structure."""
    if isinstance(items, dict):
        return {k: _index_structure(v, i) for k, v in items.items()}
    if isinstance(items, tuple):
        return tuple(_index_structure(v, i) for v in items)
    return items[i]


def batch_items_to_array(items: Any) -> Any:
    """Stack a list of (possibly nested) items into one batched structure of NumPy arrays."""
    first = items[0]
    if isinstance(first, dict):
        return {k: batch_items_to_array([it[k] for it in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(batch_items_to_array([it[j] for it in items]) for j in range(len(first)))
    try:
        import torch

        if isinstance(first, torch.Tensor):
            return torch.stack(list(items))
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return np.stack([np.asarray(it) for it in items])
