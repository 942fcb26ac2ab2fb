"""MultiAgentLearner: one Learner per module of a MultiRLModule, each with its module's config.

`update_from_batch` takes a MultiAgentBatch and updates each trainable module on its own batch
(skipping modules outside `policies_to_train`), returning `{module_id: metrics}`. Weights and
state travel as `{module_id: ...}`.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rlx.algorithms.multi_agent_options import is_trainable
from rlx.core.rl_module import MultiRLModule


class MultiAgentLearner:
    """Learners of every module of `module`, built with `learner_class(module_config, module[mid])`.

    Args:
        config: the Algorithm's frozen config (per-module configs come from
            `config.get_config_for_module`).
        learner_class: the algorithm's Learner class.
        module: the MultiRLModule (shared with the local EnvRunner).
    """

    is_multi_agent = True

    def __init__(self, config: Any, learner_class: type, module: MultiRLModule):
        self.config = config
        self.learner_class = learner_class
        self.module = module
        self.learners: dict[str, Any] = {}
        self._cache_attached: Any = None
        self.policies_to_train = config.policies_to_train
        # policy_map_capacity: a Learner's optimizer state and target networks swap with its module.
        module.set_policy_map_capacity(config.policy_map_capacity, config.policy_states_are_swappable)
        for module_id in module.keys():
            self.add_module(module_id)

    def add_module(self, module_id: str, config: Any = None) -> Any:
        """Build the Learner of `module[module_id]` (with its per-module config)."""
        from rlx.core.learner.learner import building_learner_for

        module_config = config if config is not None else self.config.get_config_for_module(module_id)
        with building_learner_for(module_id):  # the Learner's module_id (RLlib's self.module[module_id])
            learner = self.learner_class(module_config, self.module[module_id])  # (in memory: indexing brings it)
        self.learners[module_id] = learner
        self._attach_learners()
        return learner

    def _attach_learners(self) -> None:
        """Let the module cache (policy_map_capacity), once the MultiRLModule swaps modules, swap
        each Learner's tensors (optimizer state, target networks) with its module's."""
        cache = self.module.module_cache
        if cache is not None:
            for module_id, learner in self.learners.items():
                cache.attach(module_id, learner)
        self._cache_attached = cache

    def remove_module(self, module_id: str) -> None:
        """Forget the Learner of `module_id`."""
        learner = self.learners.pop(module_id, None)
        if learner is not None and self.module.module_cache is not None and module_id in self.module:
            self.module.module_cache.detach(module_id, learner)

    def is_trainable(self, module_id: str, batch: Any = None) -> bool:
        """Whether `module_id` trains (policies_to_train)."""
        return is_trainable(self.policies_to_train, module_id, batch)

    def update_from_batch(self, batch: Any, timestep: int) -> dict[str, dict[str, Any]]:
        """Update every trainable module on its batch; {module_id: metrics}."""
        from rlx.policy.sample_batch import SampleBatch

        results = {}
        if self.module.module_cache is not self._cache_attached:  # modules started swapping since
            self._attach_learners()
        for module_id, module_batch in batch.items():
            learner = self.learners.get(module_id)
            if learner is None:
                continue
            if callable(self.policies_to_train):
                module_batch = SampleBatch(module_batch)  # what RLlib's predicate receives
            if not self.is_trainable(module_id, module_batch):
                continue
            # policy_map_capacity: the module, its optimizer state and target networks stay in memory meanwhile.
            with self.module.using_module(module_id):
                results[module_id] = learner.run_update(module_batch, timestep=timestep)
        return results

    def run_update(self, batch: Any, timestep: int) -> dict[str, dict[str, Any]]:
        """`update_from_batch` (each module's Learner applies its own precision and compilation)."""
        return self.update_from_batch(batch, timestep)

    # ------------------------------------------------------------ weights and state

    def get_weights(self, module_ids: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{module_id: weights}."""
        return self.module.get_state(module_ids)

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load {module_id: weights}."""
        self.module.set_state(weights)

    def get_extra_state(self) -> dict[str, Any]:
        """{module_id: learner extra state}."""
        return {mid: learner.get_extra_state() for mid, learner in self.learners.items()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore {module_id: learner extra state} (modules not given keep theirs)."""
        for mid, value in state.items():
            if mid in self.learners:
                self.learners[mid].set_extra_state(value)

    def by_module(self) -> dict[str, Any]:
        """{module_id: Learner}."""
        return dict(self.learners)

    def foreach_learner(self, fn: Callable[[Any], Any]) -> list[Any]:
        """[fn(self)]: the one (local) learner group member."""
        return [fn(self)]

    def stop(self) -> None:
        """Nothing to release: every Learner lives in this process."""

    def __repr__(self) -> str:
        return f"MultiAgentLearner({', '.join(f'{m}: {type(l).__name__}' for m, l in self.learners.items())})"
