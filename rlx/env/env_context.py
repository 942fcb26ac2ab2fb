"""EnvContext: the env_config dict handed to env creators, plus where the env lives."""
from __future__ import annotations

from typing import Any


class EnvContext(dict):
    """A dict of env_config keys with the worker_index, vector_index, num_workers and remote
    properties that tell an env creator which copy it is building."""

    def __init__(
        self,
        env_config: dict | None = None,
        worker_index: int = 0,
        vector_index: int = 0,
        remote: bool = False,
        num_workers: int | None = None,
        recreated_worker: bool = False,
    ):
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.remote = remote
        self.num_workers = num_workers or 0
        self.recreated_worker = recreated_worker

    @property
    def num_rollout_workers(self) -> int:
        """Old name of num_workers."""
        return self.num_workers

    def copy_with_overrides(
        self,
        env_config: dict | None = None,
        worker_index: int | None = None,
        vector_index: int | None = None,
        remote: bool | None = None,
        num_workers: int | None = None,
        recreated_worker: bool | None = None,
    ) -> "EnvContext":
        """A copy with some fields replaced."""
        return EnvContext(
            dict(self) if env_config is None else env_config,
            worker_index=self.worker_index if worker_index is None else worker_index,
            vector_index=self.vector_index if vector_index is None else vector_index,
            remote=self.remote if remote is None else remote,
            num_workers=self.num_workers if num_workers is None else num_workers,
            recreated_worker=self.recreated_worker if recreated_worker is None else recreated_worker,
        )

    def __reduce__(self) -> Any:
        return (
            EnvContext,
            (dict(self), self.worker_index, self.vector_index, self.remote, self.num_workers, self.recreated_worker),
        )

    def __repr__(self) -> str:
        return (
            f"EnvContext({dict.__repr__(self)}, worker_index={self.worker_index}, "
            f"vector_index={self.vector_index}, num_workers={self.num_workers}, remote={self.remote})"
        )
