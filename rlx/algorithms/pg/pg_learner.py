"""PG's Learner: one gradient step of REINFORCE per train batch."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.ppo.ppo_learner import compute_advantages
from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import POLICY_LOSS_KEY
from rlx.core.learner.torch.torch_learner import TorchLearner


class PGLearner(TorchLearner):
    """Vanilla policy gradient (REINFORCE, Williams 1992) without a baseline:

        policy_loss = -mean_t(log pi(a_t|s_t) * G_t),   G_t = sum_k gamma^k r_{t+k} to the episode's end

    One gradient step per train batch, on its valid steps. The loss goes through
    `compute_loss_for_module(module_id=, config=, batch=, fwd_out=)` on a flat batch (`obs`,
    `actions`, `advantages` = G_t, `value_targets`), so subclasses can change or extend it (A2C
    adds its value and entropy terms). `microbatch_size()` splits the step's gradient into
    accumulated pieces (A2C's microbatching); PG has none.
    """

    #: Returns (and A2C's advantages) are computed along each trajectory of the time-major batch.
    trains_on_time_major_batches = True

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.dist_cls = self.rl_module.get_train_action_dist_cls()
        self._loss_stats: dict[str, torch.Tensor] = {}

    def advantages(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(advantages, value_targets), [T, B]: PG's are both the discounted return G_t."""
        returns, targets, _ = compute_advantages(self.rl_module, batch, gamma=self.config.gamma, use_critic=False)
        return returns, targets

    def microbatch_size(self) -> int | None:
        """Steps per gradient piece (None: the whole batch at once)."""
        return None

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One optimizer step on the batch's loss, its gradient accumulated over microbatches."""
        self.begin_update(batch, timestep)
        lr = self.set_lr_for_timestep(timestep)
        adv, targets = self.advantages(batch)
        valid = batch.get(Columns.VALID)
        select = (lambda a: a[valid]) if valid is not None else (lambda a: a.reshape((-1,) + a.shape[2:]))
        rows = {
            Columns.OBS: self.tensor(np.ascontiguousarray(select(batch[Columns.OBS]), np.float32)),
            Columns.ACTIONS: self.tensor(np.ascontiguousarray(select(batch[Columns.ACTIONS]))),
            Columns.ADVANTAGES: self.tensor(np.ascontiguousarray(select(adv), np.float32)),
            Columns.VALUE_TARGETS: self.tensor(np.ascontiguousarray(select(targets), np.float32)),
        }
        n = rows[Columns.OBS].shape[0]
        size = self.microbatch_size() or n
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        weighted: dict[str, torch.Tensor] = {}
        for start in range(0, n, size):
            piece = {k: v[start:start + size] for k, v in rows.items()}
            share = piece[Columns.OBS].shape[0] / n
            fwd_out = self.rl_module.forward_train(piece)
            loss = self.compute_loss_for_module(module_id=self.module_id, config=self.config, batch=piece,
                                                fwd_out=fwd_out)
            # Mean-loss gradients weighted by each piece's share: the gradient of the whole batch's mean.
            self.precision.backward(loss * share)
            total += loss.detach() * share
            for key, value in self._loss_stats.items():
                weighted[key] = weighted.get(key, 0.0) + value * share
        stats = {**weighted, "total_loss": total}
        grad_norm = self.step_accumulated(total, stats)
        metrics = {k: float(v) for k, v in stats.items()}
        metrics.update(gradients_global_norm=grad_norm, curr_lr=lr, num_microbatches=-(-n // size))
        metrics.update(self.end_update())
        return metrics

    def step_accumulated(self, loss: torch.Tensor, terms: dict[str, torch.Tensor]) -> float:
        """Clip and step every optimizer on the gradients accumulated in `.grad`; the global norm."""
        total_sq = 0.0
        for name, optimizer in self.optimizers.items():
            norm = self.check_update(name, self._optimizer_params[name], loss, terms)
            total_sq += norm * norm
            if np.isfinite(norm):
                self.precision.step(optimizer)
        self.precision.update()
        self.num_grad_updates += 1
        return float(np.sqrt(total_sq))

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """REINFORCE's loss -mean(log pi(a|s) * G) on a flat batch."""
        dist = self.dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        policy_loss = -(dist.logp(batch[Columns.ACTIONS]) * batch[Columns.ADVANTAGES]).mean()
        self._loss_stats = {POLICY_LOSS_KEY: policy_loss.detach()}
        return policy_loss
