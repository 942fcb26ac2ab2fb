"""InputReader: the source of experiences an Algorithm trains on (`ray.rllib.offline.input_reader`)."""
from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any, Callable

from rlx.utils.errors import ConfigError


class InputReader(metaclass=ABCMeta):
    """A source of experiences: each `next()` returns a SampleBatch or a MultiAgentBatch.

    Subclass it (or give any callable `fn(ioctx) -> InputReader`) as `input_` to feed an
    Algorithm from your own source.
    """

    @abstractmethod
    def next(self) -> Any:
        """The next batch of experiences (a SampleBatch or a MultiAgentBatch of SampleBatches)."""

    def tf_input_ops(self, queue_size: int = 1) -> Any:
        """RLlib's TensorFlow queue of this reader's batches; rlx is PyTorch-only."""
        raise ConfigError("InputReader.tf_input_ops() feeds a TensorFlow graph, and rlx is PyTorch-only: "
                          "call reader.next() for batches of NumPy columns instead.")


class SamplerInput(InputReader):
    """The "sampler" input: every `next()` samples the envs (one round of the EnvRunners)."""

    def __init__(self, sample_fn: Callable[[], Any]):
        self._sample = sample_fn

    def next(self) -> Any:
        """A batch sampled from the envs, as a SampleBatch (MultiAgentBatch in multi-agent runs)."""
        return self._sample()
