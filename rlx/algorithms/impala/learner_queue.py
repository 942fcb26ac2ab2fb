"""The bounded queue of train batches between asynchronous sampling and the learner.

IMPALA uses it as a FIFO queue (each batch trained on once, `learner_queue_size` batches);
APPO as IMPACT's circular buffer (Luo et al., 2020): `circular_buffer_num_batches` batches, each
handed to the learner up to `circular_buffer_iterations_per_batch` times, picked at random.
Either way it holds at most `capacity` batches: adding one to a full queue drops the oldest
(the sampler stops asking for more while it is full, so this is rare), and the number of env
steps dropped is reported.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np


class LearnerQueue:
    """At most `capacity` train batches, each handed out up to `uses_per_batch` times.

    Args:
        capacity: the most batches held at once.
        uses_per_batch: how many times `get()` may return each batch.
        rng: with a generator, `get()` picks among the held batches at random (the circular
            buffer); without, it returns the oldest (FIFO).
    """

    def __init__(self, capacity: int, uses_per_batch: int = 1, rng: np.random.Generator | None = None):
        if capacity < 1 or uses_per_batch < 1:
            raise ValueError(f"LearnerQueue needs capacity >= 1 and uses_per_batch >= 1, got {capacity}, "
                             f"{uses_per_batch}.")
        self.capacity = int(capacity)
        self.uses_per_batch = int(uses_per_batch)
        self._rng = rng
        # [batch, env steps, uses left], oldest first.
        self._entries: deque[list[Any]] = deque()

    def put(self, batch: Any, env_steps: int) -> int:
        """Add a train batch of `env_steps` steps; returns the env steps of the batch dropped to
        make room for it (0 when there was room)."""
        dropped = 0
        if len(self._entries) >= self.capacity:
            dropped = int(self._entries.popleft()[1])
        self._entries.append([batch, int(env_steps), self.uses_per_batch])
        return dropped

    def get(self) -> Any:
        """The next batch for the learner (None when empty); a batch leaves once used up."""
        if not self._entries:
            return None
        index = 0 if self._rng is None else int(self._rng.integers(len(self._entries)))
        entry = self._entries[index]
        entry[2] -= 1
        if entry[2] <= 0:
            del self._entries[index]
        return entry[0]

    @property
    def full(self) -> bool:
        """Whether adding a batch would drop one."""
        return len(self._entries) >= self.capacity

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"LearnerQueue({len(self)}/{self.capacity} batches, {self.uses_per_batch} use(s) each)"
