"""A3C's Learner: A2C's loss, with the gradient computed in one place and applied in another.

On a runner, `compute_gradients_on_batch` runs A2C's update up to the clipped gradient and
returns it as NumPy arrays (no optimizer step); in the driver, `apply_runner_gradients` steps
the optimizers with such a gradient. Together they are A2C's update split across processes, as
RLlib's A3C splits it between its workers and its driver.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.a2c.a2c_learner import A2CLearner

#: {optimizer name: [gradient of each of its parameters, or None where it has none]}.
Gradients = dict[str, list[np.ndarray | None]]


class A3CLearner(A2CLearner):
    """A2CLearner that can compute a batch's gradient without stepping, and step on a gradient
    computed elsewhere (by an EnvRunner)."""

    def __init__(self, config: Any, module: Any):
        super().__init__(config, module)
        self._captured: Gradients | None = None
        self._capturing = False

    def compute_gradients_on_batch(self, batch: dict[str, np.ndarray], timestep: int) -> tuple[Gradients, dict[str, Any]]:
        """A2C's gradient on `batch`, clipped by grad_clip, as {optimizer: [arrays]}, and the
        update's metrics; the weights and optimizer state stay as they are."""
        self._capturing, self._captured = True, None
        try:
            metrics = self.update_from_batch(batch, timestep)
        finally:
            self._capturing = False
        grads: Gradients = self._captured or {}
        self._captured = None
        return grads, metrics

    def step_accumulated(self, loss: torch.Tensor, terms: dict[str, torch.Tensor]) -> float:
        """A2C's optimizer step; while computing a gradient for elsewhere, clip and keep it instead."""
        if not self._capturing:
            return super().step_accumulated(loss, terms)
        total_sq = 0.0
        captured: Gradients = {}
        for name in self.optimizers:
            params = self._optimizer_params[name]
            norm = self.check_update(name, params, loss, terms)  # clips (or clears a skipped update)
            total_sq += norm * norm
            captured[name] = [None if p.grad is None else p.grad.detach().cpu().numpy().copy() for p in params]
            for p in params:
                p.grad = None
        self._captured = captured if np.isfinite(total_sq) else {}
        return float(np.sqrt(total_sq))

    def apply_runner_gradients(self, gradients: Gradients, timestep: int) -> dict[str, Any]:
        """Step every optimizer on a gradient from `compute_gradients_on_batch` (at `timestep`'s
        learning rate); the learning rates it used."""
        self.begin_update({}, timestep)
        lr = self.set_lr_for_timestep(timestep)
        for name, grads in gradients.items():
            params = self._optimizer_params[name]
            if len(grads) != len(params):
                raise ValueError(f"A runner's gradient has {len(grads)} tensors for optimizer {name!r}, which steps "
                                 f"{len(params)} parameters: the runner's module differs from the learner's.")
            for p, g in zip(params, grads):
                # (a copy: Ray hands out the arrays read-only)
                p.grad = None if g is None else torch.tensor(g, device=p.device)
            self.precision.step(self.optimizers[name])
            for p in params:
                p.grad = None
        self.precision.update()
        if gradients:
            self.num_grad_updates += 1
        return {"curr_lr": lr, **self.end_update()}
