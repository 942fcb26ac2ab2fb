"""APPO with a Ray actor every EnvRunner and Learner can reach (RLlib's example class of that name).

`SharedDataActor` is a key-value store living in a Ray actor; `APPOWithSharedDataActor` starts
one in `setup()` and hands its handle to every EnvRunner (`env_runner._shared_data_actor`), to
every Learner and to each piece of their learner connector pipelines, so that callbacks and
connector pieces can pass data to each other past the train batch. The store is part of the
Algorithm's state (`get_state()["shared_data_actor"]`). Needs Ray (rlx's `ray` extra).
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.appo import APPO


class SharedDataActor:
    """A key-value store meant to run as a Ray actor (`SharedDataActor.as_remote().remote()`)."""

    def __init__(self) -> None:
        self.storage: dict[Any, Any] = {}

    def get(self, key: Any, delete: bool = False) -> Any:
        """The value under `key` (None when absent); removed from the store when `delete`."""
        value = self.storage.get(key)
        if delete:
            self.storage.pop(key, None)
        return value

    def put(self, key: Any, value: Any) -> None:
        """Store `value` under `key`."""
        self.storage[key] = value

    def get_state(self) -> dict[Any, Any]:
        """Everything stored."""
        return self.storage

    def set_state(self, state: dict[Any, Any]) -> None:
        """Replace the store by `state`."""
        self.storage = dict(state)

    @classmethod
    def as_remote(cls) -> Any:
        """This class as a Ray actor class (imports Ray)."""
        import ray

        return ray.remote(cls)


def _share(actor: Any, handle: Any) -> None:
    """Give `actor` (an EnvRunner or Learner) and its learner connector pieces the store's handle."""
    actor._shared_data_actor = handle
    pipeline = getattr(actor, "_learner_connector", None)
    for piece in getattr(pipeline, "connectors", None) or []:
        piece._shared_data_actor = handle


class APPOWithSharedDataActor(APPO):
    """APPO whose EnvRunners and Learners share one SharedDataActor (`self.shared_data_actor`)."""

    def setup(self, config: AlgorithmConfig) -> None:
        """APPO's setup, then the shared actor, handed to every EnvRunner and Learner."""
        super().setup(config)
        self.shared_data_actor = SharedDataActor.as_remote().remote()
        handle = self.shared_data_actor
        self.env_runner_group.foreach_env_runner(lambda runner: _share(runner, handle))
        if self.eval_env_runner_group is not None:
            self.eval_env_runner_group.foreach_env_runner(lambda runner: _share(runner, handle))
        self.learner_group.foreach_learner(lambda learner: _share(learner, handle))
        pipeline = getattr(self, "_learner_connector", None)  # the pipeline rlx runs on train batches
        for piece in getattr(pipeline, "connectors", None) or []:
            piece._shared_data_actor = handle

    def get_state(self) -> dict[str, Any]:
        """APPO's state plus the shared store (`"shared_data_actor"`)."""
        import ray

        state = super().get_state()
        state["shared_data_actor"] = ray.get(self.shared_data_actor.get_state.remote())
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """APPO's set_state; the shared store from `state["shared_data_actor"]` when present."""
        state = dict(state)
        shared = state.pop("shared_data_actor", None)
        super().set_state(state)
        if shared is not None:
            self.shared_data_actor.set_state.remote(shared)
