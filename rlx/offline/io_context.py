"""IOContext: what input readers and output writers are built with (`ray.rllib.offline.io_context`)."""
from __future__ import annotations

import os
from typing import Any, Callable

from rlx.offline.input_reader import SamplerInput


class IOContext:
    """The settings and objects an InputReader or OutputWriter is constructed with.

    Args:
        log_dir: the directory to write to for `output="logdir"` (default: the working directory),
            or a callable returning it (called on first use, so building an Algorithm creates no
            directory until something is written).
        config: the Algorithm's config (an AlgorithmConfig, or a dict of settings).
        worker_index: 0 for the driver's EnvRunner, 1.. for remote ones.
        worker: the EnvRunner this reader/writer belongs to (rlx reads and writes on the driver:
            the local EnvRunner), or None.
        sampler: a callable `() -> SampleBatch` that samples the envs (what
            `default_sampler_input()` reads), or None.
    """

    def __init__(self, log_dir: str | Callable[[], str] | None = None, config: Any = None, worker_index: int = 0,
                 worker: Any = None, sampler: Any = None):
        if config is None:
            from rlx.algorithms.algorithm_config import AlgorithmConfig

            # As in RLlib: without a worker there are no spaces to normalize actions against.
            config = AlgorithmConfig().offline_data(actions_in_input_normalized=worker is None) \
                .training(train_batch_size=1)
        self._log_dir = log_dir
        self.config = config
        self.worker_index = worker_index
        self.worker = worker
        self._sampler = sampler

    @property
    def log_dir(self) -> str:
        """The directory `output="logdir"` writes to."""
        if callable(self._log_dir):
            self._log_dir = self._log_dir()
        return str(self._log_dir or os.getcwd())

    @log_dir.setter
    def log_dir(self, value: str) -> None:
        self._log_dir = value

    def default_sampler_input(self) -> Any:
        """An InputReader whose `next()` samples the envs (the "sampler" of `input_`), or None
        when this context has no envs to sample."""
        if self._sampler is None:
            return None
        return SamplerInput(self._sampler)

    @property
    def input_config(self) -> dict:
        """The config's `input_config` dict."""
        return dict(_get(self.config, "input_config") or {})

    @property
    def output_config(self) -> dict:
        """The config's `output_config` dict."""
        return dict(_get(self.config, "output_config") or {})

    def __repr__(self) -> str:
        return f"IOContext(worker_index={self.worker_index}, worker={type(self.worker).__name__})"


def _get(config: Any, key: str) -> Any:
    return config.get(key) if hasattr(config, "get") else getattr(config, key, None)
