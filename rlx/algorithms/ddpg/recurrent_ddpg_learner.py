"""Recurrent DDPG's and TD3's losses (model use_lstm=True): DDPGLearner's (twin) Q-learning and
deterministic policy gradient on replayed sequences, unrolled from the actor and critic states
stored with each sequence (R2D2-style).

Per sequence of L steps and L + 1 observations: the actor and the online critics run the
burn-in steps without gradients (only to warm up the stored state), then the rest with
gradients; the target actor and target critics run the whole sequence from the stored states.
The target of step t is the n-step reward sum plus, unless the episode terminated, the
discounted min_E target_Q(o_{t+m}, a') with a' the target actor's action (TD3: plus clipped
smoothing noise). Losses are means over `loss_mask` steps only (real steps after the burn-in):
each sequence's mean, then the mean over sequences; `policy_delay`, `use_huber` and `l2_reg`
work as in DDPGLearner.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlx.algorithms.ddpg.ddpg_learner import DDPGLearner
from rlx.algorithms.recurrent_replay import SequenceBatch, masked_mean, sequence_batch, sequence_priorities, unroll


class RecurrentDDPGLearner(DDPGLearner):
    """Learner of recurrent DDPG and TD3 on SequenceReplayBuffer batches."""

    supports_recurrent_modules = True

    def sequence_targets(self, sb: SequenceBatch) -> torch.Tensor:
        """TD targets [N, L] of a SequenceBatch (see the module docstring)."""
        cfg = self.config
        module = self.module
        with torch.no_grad():
            sums, boot, discount = sb.nstep_targets(cfg.gamma)
            next_actions, _ = module.policy_unroll(sb.obs, sb.state, pi=self.target_pi)  # [N, L + 1, A]
            if cfg.smooth_target_policy:
                noise = self.tensor(torch.randn(next_actions.shape, generator=self._generator)) * cfg.target_noise
                noise = noise.clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
                next_actions = (next_actions + noise).clamp(-1.0, 1.0)
            feats, _ = module.critic_features(sb.obs, sb.state, qf=self.target_qf)
            next_q = module.q_values(feats, next_actions, qf=self.target_qf).min(dim=0).values  # [N, L + 1]
            return sums + discount * next_q.gather(1, boot)

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One critic step; every `policy_delay` critic steps also an actor step and target updates.
        Returns metrics and per-sequence priorities as `td_error` (NumPy, in the batch's order)."""
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._schedules_constant:
            self.set_lr_for_timestep(timestep)
        module = self.module
        sb = sequence_batch(self, batch, getattr(cfg, "zero_init_states", False))
        mask, groups = sb.mask, sb.groups
        L = sb.rewards.shape[1]
        obs = sb.obs[:, :L]
        targets = self.sequence_targets(sb)
        feats = unroll(module.critic_features, obs, sb.state, groups)
        q = module.q_values(feats, sb.actions.float())  # [E, N, L]
        td = q - targets.unsqueeze(0)
        if cfg.use_huber:
            per_step = F.huber_loss(q, targets.unsqueeze(0).expand_as(q), reduction="none", delta=cfg.huber_threshold)
        else:
            per_step = 0.5 * td.pow(2)
        critic_loss = masked_mean(per_step.sum(dim=0), mask, sb.weights)
        if cfg.l2_reg > 0.0:
            critic_loss = critic_loss + cfg.l2_reg * 0.5 * sum(w.pow(2).sum() for w in module.qf.weights)
        critic_norm = self.step_on("critic", critic_loss, self.critic_params, terms={"critic_loss": critic_loss})
        self.num_grad_updates += 1
        if self.num_grad_updates % cfg.policy_delay == 0:
            # The actor follows the just-updated first critic; only its own parameters get gradients.
            with torch.no_grad():
                feats = unroll(module.critic_features, obs, sb.state, groups)
            actions = unroll(module.policy_unroll, obs, sb.state, groups)
            actor_loss = -masked_mean(module.q_values(feats, actions)[0], mask)
            self._last_actor_norm = self.step_on("actor", actor_loss, self.actor_params,
                                                 terms={"actor_loss": actor_loss})
            self._last_actor_loss = actor_loss.detach()
            self.num_actor_updates += 1
            self.maybe_update_targets(timestep, [(self.target_pi, module.pi), (self.target_qf, module.qf)])
        real = mask.bool().unsqueeze(0).expand_as(q)
        q_real = q.detach()[real]
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": self._last_actor_loss,
            "qf_mean": q_real.mean(),
            "qf_max": q_real.max(),
            "qf_min": q_real.min(),
            "gradients_critic_global_norm": critic_norm,
            "gradients_actor_global_norm": self._last_actor_norm,
            "num_grad_updates": self.num_grad_updates,
            "num_actor_updates": self.num_actor_updates,
            "td_error": sequence_priorities(td.detach().abs().mean(dim=0), mask, sb.order),
            **self.end_update(),
        }
