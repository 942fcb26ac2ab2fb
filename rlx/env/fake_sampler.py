"""`fake_sampler`: an EnvRunner that samples once and then repeats that batch.

RLlib's `config.debugging(fake_sampler=True)` makes sampling "infinitely fast" so that a
benchmark measures learning alone: a training EnvRunner steps its envs for its first
`sample()` call and answers every later call with that same batch, without stepping,
logging episodes or firing callbacks. Each answer is a fresh copy, so a Learner that adds
columns to a batch (advantages, value targets) or changes one in place never changes the
batches that follow. Evaluation EnvRunners sample as usual.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.sample_batch import map_modules
from rlx.env.config_view import EnvConfig


def copy_batch(batch: Any) -> Any:
    """A copy of a sampled batch (a dict of arrays or a MultiAgentBatch) that shares no array with it."""
    return map_modules(batch, lambda columns: {k: np.array(v, copy=True) for k, v in columns.items()})


class FakeSampler:
    """Keeps a training EnvRunner's first batch and hands out copies of it (fake_sampler=True)."""

    def __init__(self) -> None:
        self._batch: Any = None

    @classmethod
    def from_config(cls, config: EnvConfig) -> "FakeSampler | None":
        """A FakeSampler for an EnvRunner with this config; None unless fake_sampler is on and the
        runner trains (evaluation runners sample for real)."""
        if not getattr(config, "fake_sampler", False) or getattr(config, "in_evaluation", False):
            return None
        return cls()

    @property
    def has_batch(self) -> bool:
        """Whether the first batch was sampled (every later sample() repeats it)."""
        return self._batch is not None

    def remember(self, batch: Any) -> None:
        """Keep (a copy of) the runner's first batch."""
        self._batch = copy_batch(batch)

    def replay(self) -> Any:
        """A fresh copy of the kept batch."""
        return copy_batch(self._batch)
