"""A2C's Learner: the advantage actor-critic loss, one (microbatched) gradient step per train batch."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.pg.pg_learner import PGLearner
from rlx.algorithms.ppo.ppo_learner import compute_advantages
from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from rlx.core.rl_module.apis import value_function
from rlx.utils.schedules import PiecewiseSchedule


class A2CLearner(PGLearner):
    """Advantage actor-critic (Mnih et al., 2016, synchronous), mean over the batch's steps:

        policy_loss = -log pi(a_t|s_t) * A_t          (A_t: GAE with lambda_, or returns minus V)
        vf_loss     = 0.5 * (V(s_t) - V_target_t)^2
        total       = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * H[pi(.|s_t)]

    Advantages come from PPO's GAE code. With `microbatch_size`, the gradient of the train
    batch is accumulated over microbatches of that many steps before the one optimizer step
    (the same step as without, in less memory). rlx averages the losses where RLlib's A2C sums
    them, so the learning rate does not scale with the batch size.
    """

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.entropy_schedule = PiecewiseSchedule(config.entropy_coeff)
        self._curr_entropy_coeff = 0.0

    def advantages(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(advantages, value_targets), [T, B], from the module's value function."""
        cfg = self.config
        adv, targets, _ = compute_advantages(self.rl_module, batch, gamma=cfg.gamma, lambda_=cfg.lambda_,
                                             use_critic=cfg.use_critic, use_gae=cfg.use_gae)
        return adv, targets

    def microbatch_size(self) -> int | None:
        """config.microbatch_size: steps per accumulated gradient piece (None: the whole batch)."""
        return self.config.microbatch_size

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """PGLearner's update with the entropy coefficient of `timestep`."""
        self._curr_entropy_coeff = self.entropy_schedule.value(timestep)
        metrics = super().update_from_batch(batch, timestep)
        metrics["curr_entropy_coeff"] = self._curr_entropy_coeff
        return metrics

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """A2C's loss on a flat batch (see the class docstring)."""
        dist = self.dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        policy_loss = -(dist.logp(batch[Columns.ACTIONS]) * batch[Columns.ADVANTAGES]).mean()
        entropy = dist.entropy().mean()
        total = policy_loss - self._curr_entropy_coeff * entropy
        stats = {POLICY_LOSS_KEY: policy_loss.detach(), ENTROPY_KEY: entropy.detach()}
        if config.use_critic:
            values = fwd_out.get(Columns.VF_PREDS)
            if values is None:
                values = value_function(self.rl_module, "A2C's value loss")(batch)
            vf_loss = 0.5 * (values - batch[Columns.VALUE_TARGETS]).pow(2).mean()
            total = total + config.vf_loss_coeff * vf_loss
            stats[VF_LOSS_KEY] = vf_loss.detach()
        self._loss_stats = stats
        return total
