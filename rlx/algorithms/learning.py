"""One learner update of an Algorithm on a train batch (`Algorithm.learn_on_batch`): the
config's learner connector pipeline (built by rlx.algorithms.components), then the old API's
`on_learn_on_batch` callbacks, then the learner container's update.

All of it runs per module on the batch's per-module view (`as_multi_agent`): a single-agent
batch is the batch of its one module, and the Algorithm's container (`algo.learners`) says what
a single-agent run shows its users (module id None in episodes, one module's metrics).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rlx.core import DEFAULT_POLICY_ID
from rlx.core.sample_batch import MultiAgentBatch, SampleBatch, as_multi_agent

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm

#: fn(module_id, RLModule, that module's train batch) -> the module's new train batch.
ModuleBatchFn = Callable[[Any, Any, Any], Any]


def for_each_module_batch(algo: "Algorithm", batch: Any, fn: ModuleBatchFn) -> MultiAgentBatch:
    """`batch` as per-module batches (`as_multi_agent`), every module's part replaced by
    `fn(module_id, module, part)` (the module: the local EnvRunner's).

    A single-agent batch is its one module's part; `fn` sees the module id None there, as
    RLlib's single-agent episodes have it.
    """
    batch = as_multi_agent(batch)
    learners, modules = algo.learners, algo.env_runner.module
    batches = batch.policy_batches
    for module_id in list(batches):
        batches[module_id] = fn(learners.user_module_id(module_id), learners.module_in(modules, module_id),
                                batches[module_id])
    return batch


def per_module_batch(algo: "Algorithm", batch: Any) -> MultiAgentBatch:
    """`batch` as per-module batches: any batch type (`as_multi_agent`), or a plain
    {module_id: columns} dict of `algo`'s modules (its env steps: its largest module batch's)."""
    if type(batch) is dict and batch and all(isinstance(part, dict) for part in batch.values()) \
            and set(batch) <= set(algo.learners):
        return MultiAgentBatch(batch, max(as_multi_agent(part).env_steps() for part in batch.values()))
    return as_multi_agent(batch)


def learn_per_module(algo: "Algorithm", batch: Any, timestep: int) -> dict[str, dict[str, Any]]:
    """Update `algo`'s learners on `batch` (any batch type; see Algorithm.learn_on_batch);
    {module_id: metrics} of the modules that trained."""
    pipeline = getattr(algo, "_learner_connector", None)
    batch = per_module_batch(algo, batch)
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
    metrics = algo.learners.run_update(batch, timestep=timestep)
    algo.weights_version += 1
    if extra:
        metrics = {mid: {**m, **extra} for mid, m in metrics.items()}
    return metrics


def learn_on_batch(algo: "Algorithm", batch: Any, timestep: int) -> dict[str, Any]:
    """`learn_per_module`, reported as `algo.learner` reports: a single-agent run's one module's
    metrics, a multi-agent run's {module_id: metrics}."""
    return algo.learners.learner_result(learn_per_module(algo, batch, timestep))
