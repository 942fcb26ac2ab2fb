"""What a Learner's update runs on and through when it goes by RLlib's loss API: its module's part
of a batch, the train batch its learner connector pipeline makes of episodes, and the update of
`num_epochs` passes of minibatches through `compute_losses` (`loss_api_update`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import torch

from rlx.core.learner.functional import minibatches, module_batches, sum_losses

if TYPE_CHECKING:
    from rlx.core.learner.learner import Learner

__all__ = ["loss_api_update", "module_part", "run_episodes_connector"]


def module_part(batch: Any, module_id: str) -> Any:
    """This module's columns of `batch`: a MultiAgentBatch's or {module_id: columns} dict's part
    (None when absent), or `batch` itself when it is one module's columns."""
    parts = getattr(batch, "policy_batches", None)
    if parts is None and isinstance(batch, Mapping) and batch and all(isinstance(v, Mapping) for v in batch.values()):
        parts = batch
    if parts is None:
        return batch
    return parts.get(module_id)


def run_episodes_connector(pipeline: Any, learner_class: type, *, rl_module: Any, episodes: list[Any],
                           metrics: Any) -> Any:
    """The train batch `pipeline` (a Learner's learner connector pipeline) makes of `episodes` for a
    Learner of `learner_class`: time-major [T, B] columns with VALID for one that
    `trains_on_time_major_batches` (when the pipeline lays episodes out itself, as rlx's does),
    else flat rows."""
    kwargs: dict[str, Any] = {}
    if getattr(pipeline, "lays_out_episodes", False):
        kwargs["time_major"] = bool(getattr(learner_class, "trains_on_time_major_batches", False))
    return pipeline(rl_module=rl_module, batch={}, episodes=episodes, metrics=metrics, shared_data={}, **kwargs)


def loss_api_update(learner: Learner, batch: Mapping[str, Any], timestep: int, *, num_epochs: int = 1,
                    minibatch_size: int | None = None, shuffle: bool = False) -> dict[str, Any]:
    """RLlib's update through the loss API: `num_epochs` passes over `batch` in minibatches of
    `minibatch_size` rows (the whole batch when None), each the module's `forward_train`, then
    `compute_losses` and one step of every optimizer; the metrics include each pass's total_loss."""
    learner.begin_update(batch, timestep)
    learner.set_lr_for_timestep(timestep)
    parts = dict(batch) if learner.trains_all_modules else {learner.module_id: dict(batch)}
    tensors = module_batches(parts, list(parts), learner.device)
    losses: dict[str, torch.Tensor] = {}
    for minibatch in minibatches(tensors, num_epochs=num_epochs, minibatch_size=minibatch_size, shuffle=shuffle):
        losses = learner.compute_losses(fwd_out=learner.forward_train_modules(minibatch), batch=minibatch)
        learner.apply_loss_to_all_optimizers(sum_losses(losses), terms=losses)
    metrics = learner.end_update()
    if losses and learner.trains_all_modules:  # each module's loss in its results (the last minibatch's)
        for mid, loss in losses.items():
            metrics.setdefault(mid, {}).setdefault("total_loss", float(loss.detach()))
    elif losses:
        metrics.setdefault("total_loss", float(sum_losses(losses).detach()))
    return metrics
