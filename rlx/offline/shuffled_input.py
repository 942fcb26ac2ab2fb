"""ShuffledInput: batches drawn at random from a sliding window (`ray.rllib.offline.shuffled_input`)."""
from __future__ import annotations

import logging
import random
from typing import Any

from rlx.offline.input_reader import InputReader

logger = logging.getLogger("rlx")


class ShuffledInput(InputReader):
    """Shuffles the batches of `child` over a window of `n` batches (`shuffle_buffer_size`).

    The window fills first (so the first `next()` reads `n` batches); then each `next()`
    reads one new batch into a random slot and returns a random slot's batch.
    """

    def __init__(self, child: InputReader, n: int = 0, seed: int | None = None):
        self.n = int(n)
        self.child = child
        self.buffer: list[Any] = []
        self._rng = random.Random(seed)

    def next(self) -> Any:
        """A batch from the shuffle window (the child's next batch when n <= 1)."""
        if self.n <= 1:
            return self.child.next()
        if len(self.buffer) < self.n:
            logger.info("Filling the shuffle buffer to %d batches", self.n)
            while len(self.buffer) < self.n:
                self.buffer.append(self.child.next())
        self.buffer[self._rng.randrange(len(self.buffer))] = self.child.next()
        return self._rng.choice(self.buffer)
