"""One learner update of an Algorithm on a train batch (`Algorithm.learn_on_batch`): the
config's learner connector pipeline (built by rlx.algorithms.components), then the old API's
`on_learn_on_batch` callbacks, then the learner container's update.

Both run per module: a single-agent batch is the one module's batch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rlx.core import DEFAULT_POLICY_ID
from rlx.core.sample_batch import SampleBatch

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm

#: fn(module_id, RLModule, that module's train batch) -> the module's new train batch.
ModuleBatchFn = Callable[[Any, Any, Any], Any]


def for_each_module_batch(algo: "Algorithm", batch: Any, fn: ModuleBatchFn) -> Any:
    """`batch` with every module's part replaced by `fn(module_id, module, part)`.

    A single-agent batch is the one module's part; its module id is None there, as RLlib's
    single-agent episodes have it. (The branch goes once the runners return one batch type.)
    """
    modules = algo.env_runner.module
    if not algo.is_multi_agent:
        return fn(None, modules, batch)
    batches = getattr(batch, "policy_batches", batch)
    for module_id in list(batches):
        batches[module_id] = fn(module_id, modules[module_id], batches[module_id])
    return batch


def learn_on_batch(algo: "Algorithm", batch: Any, timestep: int) -> dict[str, Any]:
    """Update `algo`'s learner on `batch` (see Algorithm.learn_on_batch); the learner's metrics."""
    pipeline = getattr(algo, "_learner_connector", None)
    if pipeline is not None:
        from rlx.connectors.learner.learner_connector_pipeline import run_learner_connector  # torch

        batch = for_each_module_batch(algo, batch, lambda mid, module, part: run_learner_connector(
            pipeline, dict(part), module, module_id=mid, metrics=algo.metrics))
    extra: dict[str, Any] = {}
    callback = algo._on_learn_on_batch
    if callback is not None:
        def run_callback(module_id: Any, module: Any, part: Any) -> SampleBatch:
            part = SampleBatch(part)  # the same arrays: in-place changes reach the loss
            callback(policy=algo.get_policy(module_id or DEFAULT_POLICY_ID), train_batch=part, result=extra)
            return part

        batch = for_each_module_batch(algo, batch, run_callback)
    metrics = algo.learner.run_update(batch, timestep=timestep)
    algo.weights_version += 1
    if extra:
        # A single-agent learner reports its one module's metrics (not {module_id: metrics}).
        metrics = {mid: {**m, **extra} for mid, m in metrics.items()} if algo.is_multi_agent else \
            {**metrics, **extra}
    return metrics
