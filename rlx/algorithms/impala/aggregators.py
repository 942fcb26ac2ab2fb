"""IMPALA/APPO's aggregator actors (`num_aggregator_actors_per_learner > 0`, on Ray).

Each aggregator is a Ray actor that turns the object references of one train batch's fragments
into the train batch: it fetches the fragments from the object store (straight from the runners'
nodes), joins them side by side, and its answer stays in the object store as the train batch's
reference, which the learner fetches. The driver only passes references along.

`num_aggregator_actors_per_learner * max(1, num_learners)` actors are started, each with one CPU
(as in RLlib), and get train batches in turn. Ray restarts an aggregator that dies
(`max_restarts=-1`); a train batch whose aggregator died is lost and counted as dropped.
"""
from __future__ import annotations

import logging
import os
from typing import Any

from rlx.algorithms.impala.object_refs import join_parts

logger = logging.getLogger("rlx")

#: Seconds `AggregatorPool` waits for its actors to start before it fails with an error.
START_TIMEOUT_S = 120.0


class _AggregatorActor:
    """Body of one aggregator actor."""

    def where(self) -> dict[str, Any]:
        """Its pid and node id (answers once the actor runs)."""
        import ray

        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def join(self, parts: list[Any]) -> Any:
        """The train batch of `parts` (fragment references or batches); None if all were lost."""
        return join_parts(parts, writable=False)  # serialized again at once


_join_task: Any = None


def join_remotely(parts: list[Any]) -> Any:
    """The ObjectRef of the train batch a Ray task (one CPU, anywhere) joins from `parts`: the
    aggregation for learner actors when no aggregator actors were asked for."""
    global _join_task
    if _join_task is None:
        import ray

        _join_task = ray.remote(num_cpus=1)(_join_parts_task)
    return _join_task.remote(parts)


def _join_parts_task(parts: list[Any]) -> Any:
    return join_parts(parts, writable=False)


class AggregatorPool:
    """`num_actors` aggregator actors; `join(parts)` hands a train batch's fragments to the next.

    Args:
        num_actors: how many actors to start.
        num_cpus: CPUs each one asks Ray for.
    """

    def __init__(self, num_actors: int, num_cpus: float = 1.0):
        import ray

        if not ray.is_initialized():
            # As RLlib's aggregator actors do through Ray's auto-init: a local Ray instance starts.
            logger.info("num_aggregator_actors_per_learner=%d: starting a local Ray instance for the aggregator "
                        "actors (call ray.init() first to choose the cluster).", num_actors)
            ray.init()
        actor_cls = ray.remote(_AggregatorActor).options(num_cpus=num_cpus, max_restarts=-1, max_concurrency=1)
        # Ray actor handles, typed Any: the ray stubs cannot see the `.remote` of their methods.
        self.actors: list[Any] = [actor_cls.remote() for _ in range(int(num_actors))]
        self._next = 0
        try:
            self.locations = ray.get([a.where.remote() for a in self.actors], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError as err:
            self.stop()
            raise RuntimeError(
                f"The {num_actors} aggregator actor(s) (num_aggregator_actors_per_learner, {num_cpus:g} CPU each) did "
                f"not start within {START_TIMEOUT_S:.0f} s: the Ray cluster lacks the CPUs for them beside the "
                f"EnvRunners (ray.available_resources() shows what is free). Lower num_aggregator_actors_per_learner "
                f"or add CPUs.") from err

    def join(self, parts: list[Any]) -> Any:
        """The ObjectRef of the train batch an aggregator makes of `parts` (not waited for)."""
        actor = self.actors[self._next % len(self.actors)]
        self._next += 1
        return actor.join.remote(parts)

    def stop(self) -> None:
        """Kill the actors."""
        import ray

        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as err:  # already gone, or Ray shut down
                logger.debug("aggregator actor was already gone: %s", err)
        self.actors = []

    def __len__(self) -> int:
        return len(self.actors)
