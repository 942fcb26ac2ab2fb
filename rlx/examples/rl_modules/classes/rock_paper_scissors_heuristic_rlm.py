"""Heuristic rock-paper-scissors players as RLModules that choose their actions themselves.

Both read the opponent's previous move (0 rock, 1 paper, 2 scissors; 3 right after the reset)
from their observation, given as the Discrete value or its one-hot encoding.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.core.rl_module.rl_module import RLModule


def _moves(obs: Any) -> list[int]:
    """The observed moves of a batch, whether Discrete values or one-hot rows."""
    arr = np.asarray(obs.numpy() if hasattr(obs, "numpy") else obs)
    if arr.ndim >= 2:
        return [int(i) for i in arr.reshape(arr.shape[0], -1).argmax(axis=1)]
    return [int(i) for i in arr.reshape(-1)]


class _Untrainable(RLModule):
    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward_inference(batch, **kwargs)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise TypeError(f"{type(self).__name__} is a fixed heuristic with nothing to train: leave its module id out "
                        "of config.multi_agent(policies_to_train=[...]).")


class AlwaysSameHeuristicRLM(_Untrainable):
    """Plays one random move at an episode's start, then repeats it for the whole episode (one
    remembered move per row of the batch, i.e. per sub-env)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._move_per_row: dict[int, int] = {}

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        actions = []
        for i, seen in enumerate(_moves(batch[Columns.OBS])):
            if seen == 3 or i not in self._move_per_row:
                self._move_per_row[i] = int(np.random.randint(3))
            actions.append(self._move_per_row[i])
        return {Columns.ACTIONS: np.asarray(actions, dtype=np.int64)}


class BeatLastHeuristicRLM(_Untrainable):
    """Plays the move that beats the opponent's previous move (random right after the reset)."""

    @staticmethod
    def _beat(seen: int) -> int:
        return (seen + 1) % 3 if seen in (0, 1, 2) else int(np.random.randint(3))

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTIONS: np.asarray([self._beat(m) for m in _moves(batch[Columns.OBS])], dtype=np.int64)}
