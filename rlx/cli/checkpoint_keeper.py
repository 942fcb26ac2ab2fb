"""Which checkpoints of a run stay on disk, and which one is the best (Tune's CheckpointConfig:
`num_to_keep`, `checkpoint_score_attribute`, `checkpoint_score_order`).

Without a score attribute the most recent `num_to_keep` checkpoints stay. With one, each
checkpoint is scored by that result key at the iteration it was saved, and the `num_to_keep`
best-scoring stay (a checkpoint whose result lacks the key scores worst); as in Tune, the latest
checkpoint always stays too (a run restores from it), and the best one is never deleted.
"""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from typing import Any, Mapping

from rlx.cli.stop import canonical_key, lookup
from rlx.utils.errors import ConfigError

__all__ = ["CheckpointKeeper", "SCORE_ORDERS", "check_checkpoint_policy"]

SCORE_ORDERS = ("max", "min")


def check_checkpoint_policy(num_to_keep: Any, score_attribute: Any, score_order: Any, where: str) -> None:
    """Raise a ConfigError naming `where` if a checkpoint policy setting has the wrong type or value."""
    if num_to_keep is not None and (isinstance(num_to_keep, bool) or not isinstance(num_to_keep, int)
                                    or num_to_keep < 1):
        raise ConfigError(f"{where}: num_to_keep must be a whole number >= 1 (or null to keep every checkpoint), "
                          f"got {num_to_keep!r}.")
    if score_attribute is not None and (not isinstance(score_attribute, str) or not score_attribute):
        raise ConfigError(f"{where}: checkpoint_score_attribute must be a result key such as "
                          f"'env_runners/episode_return_mean', got {score_attribute!r}.")
    if score_order is not None and score_order not in SCORE_ORDERS:
        raise ConfigError(f"{where}: checkpoint_score_order must be 'max' or 'min', got {score_order!r}.")


@dataclass
class _Saved:
    path: str
    iteration: int
    score: float | None  # None: the result had no (finite) value for the score attribute


@dataclass
class CheckpointKeeper:
    """The checkpoints of one run: registers each saved one, deletes those the policy drops,
    and names the best.

    Args:
        num_to_keep: how many checkpoints stay on disk (None: all).
        score_attribute: the result key (nested keys written a/b) that ranks checkpoints (None:
            by recency).
        score_order: "max" (higher is better) or "min".
    """

    num_to_keep: int | None = None
    score_attribute: str | None = None
    score_order: str = "max"
    saved: list[_Saved] = field(default_factory=list)
    _missing_noted: bool = False

    def __post_init__(self) -> None:
        check_checkpoint_policy(self.num_to_keep, self.score_attribute, self.score_order, "checkpoint_config")

    def add(self, path: str, iteration: int, result: Mapping[str, Any] | None) -> list[str]:
        """Register the checkpoint just saved at `path` after the iteration whose result is
        `result`; delete the ones the policy drops and return their paths."""
        self.saved = [s for s in self.saved if s.path != path]  # saved again at the same iteration
        self.saved.append(_Saved(path, int(iteration), self._score(result)))
        if self.num_to_keep is None or len(self.saved) <= self.num_to_keep:
            return []
        keep = {id(s) for s in self._ranked()[:self.num_to_keep]}
        keep.add(id(self.saved[-1]))  # the latest always stays (as in Tune)
        dropped = [s for s in self.saved if id(s) not in keep]
        self.saved = [s for s in self.saved if id(s) in keep]
        for s in dropped:
            shutil.rmtree(s.path, ignore_errors=True)
        return [s.path for s in dropped]

    def missing_score_note(self) -> str | None:
        """A one-time message when the latest checkpoint's result lacked the score attribute
        (a typo, or a key reported only some iterations); None otherwise."""
        if self.score_attribute is None or self._missing_noted or not self.saved or self.saved[-1].score is not None:
            return None
        self._missing_noted = True
        return (f"checkpoint_score_attribute '{self.score_attribute}' has no numeric value in the result of iteration "
                f"{self.saved[-1].iteration}; such checkpoints rank last. Use a key of the results "
                "(nested keys written a/b), e.g. env_runners/episode_return_mean.")

    @property
    def paths(self) -> list[str]:
        """The checkpoints on disk, oldest first."""
        return [s.path for s in self.saved]

    @property
    def best(self) -> tuple[str, float | None] | None:
        """(path, score) of the best checkpoint kept (the latest without a score attribute)."""
        if not self.saved:
            return None
        top = self._ranked()[0]
        return top.path, top.score

    def _ranked(self) -> list[_Saved]:
        """The saved checkpoints, best first (newest first among equals and without a score)."""
        newest_first = list(reversed(self.saved))
        if self.score_attribute is None:
            return newest_first
        sign = 1.0 if self.score_order == "max" else -1.0
        return sorted(newest_first, key=lambda s: -math.inf if s.score is None else sign * s.score, reverse=True)

    def _score(self, result: Mapping[str, Any] | None) -> float | None:
        if self.score_attribute is None or result is None:
            return None
        value = lookup(dict(result), self.score_attribute)
        if value is None:  # RLlib's older spellings (episode_reward_mean, ...)
            value = lookup(dict(result), canonical_key(self.score_attribute))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return None
        return float(value)
