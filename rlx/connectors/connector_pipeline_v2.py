"""ConnectorPipelineV2: an ordered list of connector pieces called one after the other."""
from __future__ import annotations

from typing import Any, Iterable

import gymnasium as gym

from rlx.connectors.connector_v2 import ConnectorV2


class ConnectorPipelineV2(ConnectorV2):
    """Calls its pieces in order, each on the batch the previous one returned.

    Each piece's input spaces are the previous piece's output spaces; the pipeline's output
    spaces are the last piece's.
    """

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, *,
                 connectors: Iterable[ConnectorV2] | None = None, **kwargs: Any) -> None:
        self.connectors: list[ConnectorV2] = []
        for piece in connectors or []:
            _check_piece(piece)
            self.connectors.append(piece)
        super().__init__(input_observation_space, input_action_space, **kwargs)

    def recompute_output_observation_space(self, input_observation_space: gym.Space,
                                           input_action_space: gym.Space) -> gym.Space:
        self._fix_spaces(input_observation_space, input_action_space)
        return self.connectors[-1].observation_space if self.connectors else input_observation_space

    def recompute_output_action_space(self, input_observation_space: gym.Space,
                                      input_action_space: gym.Space) -> gym.Space:
        self._fix_spaces(input_observation_space, input_action_space)
        return self.connectors[-1].action_space if self.connectors else input_action_space

    def _fix_spaces(self, obs_space: gym.Space | None, act_space: gym.Space | None) -> None:
        """Give each piece the previous piece's output spaces as its input spaces."""
        for piece in self.connectors:
            if act_space is not None:
                piece.input_action_space = act_space
            if obs_space is not None:
                piece.input_observation_space = obs_space
            obs_space = piece.observation_space if piece.observation_space is not None else obs_space
            act_space = piece.action_space if piece.action_space is not None else act_space

    def _refresh(self) -> None:
        if self.input_observation_space is not None or self.input_action_space is not None:
            self._fix_spaces(self.input_observation_space, self.input_action_space)
            if self.connectors:
                last = self.connectors[-1]
                self._observation_space = last.observation_space or self.input_observation_space
                self._action_space = last.action_space or self.input_action_space
            else:
                self._observation_space, self._action_space = self.input_observation_space, self.input_action_space

    def __len__(self) -> int:
        return len(self.connectors)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, metrics: Any = None,
                 **kwargs: Any) -> Any:
        """Run every piece in order; returns the last piece's batch."""
        shared_data = {} if shared_data is None else shared_data
        for piece in self.connectors:
            batch = piece(rl_module=rl_module, batch=batch, episodes=episodes, explore=explore,
                          shared_data=shared_data, metrics=metrics, **kwargs)
            if batch is None:
                raise TypeError(f"Connector piece {piece.name} returned None; a piece must return the batch "
                                "(return the `batch` argument when it only changes episodes).")
        return batch

    # ------------------------------------------------------------------ editing

    def _index_of(self, name_or_class: str | type) -> int:
        for i, piece in enumerate(self.connectors):
            if (isinstance(name_or_class, str) and piece.name == name_or_class) or \
                    (isinstance(name_or_class, type) and isinstance(piece, name_or_class)):
                return i
        names = ", ".join(p.name for p in self.connectors) or "none"
        raise ValueError(f"No connector piece {getattr(name_or_class, '__name__', name_or_class)!r} in this "
                         f"pipeline; it has: {names}.")

    def remove(self, name_or_class: str | type) -> None:
        """Remove the first piece with this class name (or of this class)."""
        del self.connectors[self._index_of(name_or_class)]
        self._refresh()

    def insert_before(self, name_or_class: str | type, connector: ConnectorV2) -> ConnectorV2:
        """Insert `connector` right before the first piece with this name or class."""
        _check_piece(connector)
        self.connectors.insert(self._index_of(name_or_class), connector)
        self._refresh()
        return connector

    def insert_after(self, name_or_class: str | type, connector: ConnectorV2) -> ConnectorV2:
        """Insert `connector` right after the first piece with this name or class."""
        _check_piece(connector)
        self.connectors.insert(self._index_of(name_or_class) + 1, connector)
        self._refresh()
        return connector

    def prepend(self, connector: ConnectorV2) -> None:
        """Add `connector` as the first piece."""
        _check_piece(connector)
        self.connectors.insert(0, connector)
        self._refresh()

    def append(self, connector: ConnectorV2) -> None:
        """Add `connector` as the last piece."""
        _check_piece(connector)
        self.connectors.append(connector)
        self._refresh()

    def __getitem__(self, key: int | str | type) -> Any:
        """A piece by position, or the list of pieces with this class name or of this class."""
        if isinstance(key, int):
            return self.connectors[key]
        if isinstance(key, slice):
            return self.connectors[key]
        return [p for p in self.connectors
                if (isinstance(key, str) and p.name == key) or (isinstance(key, type) and isinstance(p, key))]

    # ------------------------------------------------------------------ state

    def _keys(self) -> list[str]:
        seen: dict[str, int] = {}
        keys = []
        for piece in self.connectors:
            n = seen.get(piece.name, 0)
            seen[piece.name] = n + 1
            keys.append(piece.name if n == 0 else f"{piece.name}_{n}")
        return keys

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict[str, Any]:
        """{piece name: piece state} of the pieces that have state."""
        out = {}
        for key, piece in zip(self._keys(), self.connectors):
            state = piece.get_state()
            if state:
                out[key] = state
        return out

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore each piece's state from get_state()."""
        for key, piece in zip(self._keys(), self.connectors):
            if key in state:
                piece.set_state(state[key])

    def reset_state(self) -> None:
        """Reset every piece's state."""
        for piece in self.connectors:
            piece.reset_state()

    def merge_states(self, states: list[dict[str, Any]]) -> dict[str, Any]:
        """Merge the states of several copies of this pipeline, piece by piece."""
        out = {}
        for key, piece in zip(self._keys(), self.connectors):
            parts = [s[key] for s in states if key in s]
            if parts:
                out[key] = piece.merge_states(parts)
        return out

    def pop_delta(self) -> dict[str, Any]:
        """What the pieces learned since the last call (pieces with rlx's `pop_delta`)."""
        out = {}
        for key, piece in zip(self._keys(), self.connectors):
            pop = getattr(piece, "pop_delta", None)
            if pop is not None:
                out[key] = pop()
        return out

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Fold another copy's pop_delta() into these pieces."""
        for key, piece in zip(self._keys(), self.connectors):
            merge = getattr(piece, "merge_delta", None)
            if merge is not None and key in delta:
                merge(delta[key])

    @property
    def has_state(self) -> bool:
        """Whether any piece keeps state that runners must share."""
        return any(hasattr(p, "pop_delta") or (isinstance(p, ConnectorPipelineV2) and p.has_state)
                   for p in self.connectors)

    def __repr__(self, indentation: int = 0) -> str:
        inner = "\n".join(p.__str__(indentation + 4) if isinstance(p, ConnectorPipelineV2) else
                          " " * (indentation + 4) + p.name for p in self.connectors)
        return " " * indentation + type(self).__name__ + ("\n" + inner if inner else "")

    __str__ = __repr__


def _check_piece(piece: Any) -> None:
    if not isinstance(piece, ConnectorV2):
        raise TypeError(f"A connector pipeline holds ConnectorV2 pieces; got {piece!r:.80} "
                        f"({type(piece).__name__}).")
