"""The pieces functional (stateless) updates share: training tensors per module, minibatches,
forward passes with given parameters, and named-parameter dicts.

A functional update never changes a module's own parameters: it calls the module with a
dict of parameter tensors (`torch.func.functional_call`) and returns new tensors computed
from them, so a later loss can be differentiated through the update (meta-learning).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np
import torch

#: {module_id: {parameter name: tensor}}.
NamedParams = dict[str, dict[str, torch.Tensor]]



def sum_losses(loss_per_module: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The sum of the modules' losses; a ValueError when there is none to back-propagate."""
    losses = list(loss_per_module.values())
    if not losses:
        raise ValueError("No loss to back-propagate: compute_losses returned no module's loss.")
    return sum(losses[1:], losses[0])

def module_batches(batch: Any, module_ids: list[str], device: torch.device) -> dict[str, dict[str, Any]]:
    """{module_id: {column: tensor on `device`}} of a MultiAgentBatch, a {module_id: columns}
    dict, or (with one module) a single-agent SampleBatch/dict of columns. Unknown module ids
    raise ValueError."""
    policy_batches = getattr(batch, "policy_batches", None)
    if policy_batches is None:
        if isinstance(batch, Mapping) and batch and all(k in module_ids for k in batch):
            policy_batches = batch
        elif isinstance(batch, Mapping) and len(module_ids) == 1:
            policy_batches = {module_ids[0]: batch}
        else:
            raise ValueError(f"Expected a MultiAgentBatch (or {{module_id: columns}}) for the modules {module_ids}, "
                             f"got {type(batch).__name__}.")
    unknown = sorted(set(policy_batches) - set(module_ids))
    if unknown:
        raise ValueError(f"Batch contains module ids {unknown} that are not in this Learner ({module_ids}).")
    return {mid: {k: _tensor(v, device) for k, v in columns.items()} for mid, columns in policy_batches.items()}


def _tensor(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return torch.as_tensor(value, device=device)
    return value


def _rows(columns: Mapping[str, Any]) -> int:
    for value in columns.values():
        if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim:
            return int(value.shape[0])
    return 0


def minibatches(batches: dict[str, dict[str, Any]], *, num_epochs: int = 1, minibatch_size: int | None = None,
                shuffle: bool = False, num_total_minibatches: int = 0,
                generator: torch.Generator | None = None) -> Iterator[dict[str, dict[str, Any]]]:
    """The minibatches of `num_epochs` passes over each module's rows (`minibatch_size` rows
    each, the last of a pass may be smaller; the whole batch when None), shuffled per pass
    when `shuffle`; `num_total_minibatches` > 0 stops after that many."""
    sizes = {mid: _rows(cols) for mid, cols in batches.items()}
    largest = max(sizes.values(), default=0)
    size = int(minibatch_size) if minibatch_size else largest
    per_epoch = max(1, -(-largest // max(1, size)))
    count = 0
    for _ in range(max(1, int(num_epochs))):
        orders = {mid: (torch.randperm(n, generator=generator) if shuffle else torch.arange(n)) for mid, n in sizes.items()}
        for i in range(per_epoch):
            if num_total_minibatches and count >= num_total_minibatches:
                return
            yield {mid: _take(cols, orders[mid][i * size:(i + 1) * size] if sizes[mid] else None)
                   for mid, cols in batches.items()}
            count += 1


def _take(columns: dict[str, Any], rows: torch.Tensor | None) -> dict[str, Any]:
    if rows is None or len(rows) == _rows(columns):
        if rows is None or bool((rows == torch.arange(len(rows))).all()):
            return dict(columns)
    out = {}
    for key, value in columns.items():
        if isinstance(value, torch.Tensor) and value.ndim:
            out[key] = value[rows.to(value.device)]
        elif isinstance(value, np.ndarray) and value.ndim:
            out[key] = value[rows.numpy()]
        else:
            out[key] = value
    return out


def named_parameters(modules: Any, clone: bool = False) -> NamedParams:
    """{module_id: {name: parameter}} of a {module_id: module} mapping; with `clone`, clones
    that still carry the gradient back to the parameters (the start of a functional update)."""
    return {mid: {name: (p.clone() if clone else p) for name, p in modules[mid].named_parameters()}
            for mid in modules.keys()}


def functional_forward(modules: Any, params: NamedParams, batch: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{module_id: the module's forward (= forward_train) output computed with `params`} for
    each module id of `batch`."""
    return {mid: torch.func.functional_call(modules[mid], params[mid], (columns,))
            for mid, columns in batch.items()}
