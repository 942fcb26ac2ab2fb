"""Recurrent SAC's losses (model use_lstm=True): SAC's critic, actor and alpha losses on replayed
sequences, unrolled from the policy and critic states stored with each sequence (R2D2-style).

Per sequence of L steps and L + 1 observations: the policy and the online critics run the
burn-in steps without gradients (only to warm up the stored state), then the rest with
gradients; the target critics run the whole sequence from the stored critic state. The target
of step t is the n-step reward sum plus, unless the episode terminated, the discounted soft
value of observation t+m (rlx.algorithms.recurrent_replay.nstep_targets) under the current
policy and the target critics. Every loss is a mean over `loss_mask` steps only (real steps
after the burn-in): each sequence's mean, then the mean over sequences, so zero padding and
burn-in steps change neither losses nor gradients.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.recurrent_replay import masked_mean, sequence_batch, sequence_priorities, unroll
from rlx.algorithms.sac.sac_learner import SACLearner, squashed_gaussian_rsample


class RecurrentSACLearner(SACLearner):
    """Learner of recurrent SAC on SequenceReplayBuffer batches (optimizers "actor", "critic", "alpha")."""

    supports_recurrent_modules = True

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One critic, actor and alpha step on replayed sequences; returns metrics and per-sequence
        priorities as `td_error` (NumPy, in the batch's order)."""
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._schedules_constant:
            self.set_lr_for_timestep(timestep)
        module = self.module
        sb = sequence_batch(self, batch, getattr(cfg, "zero_init_states", False))
        mask, groups = sb.mask, sb.groups
        N, L = sb.rewards.shape
        alpha = self.log_alpha.detach().exp()
        pi_all = unroll(module.policy_unroll, sb.obs, sb.state, groups)  # [N, L + 1, ...]

        def critic_features() -> torch.Tensor:
            return unroll(module.critic_features, sb.obs[:, :L], sb.state, groups)  # [N, L, E, cell]

        with torch.no_grad():
            sums, boot, discount = sb.nstep_targets(cfg.gamma)
            target_feats, _ = module.critic_features(sb.obs, sb.state, qf=self.target_qf)
        if module.discrete:
            actions = sb.actions.long()
            logp_all = torch.log_softmax(pi_all, dim=-1)
            with torch.no_grad():
                next_q = module.q_values(target_feats, qf=self.target_qf).min(dim=0).values  # [N, L + 1, n]
                soft_v = (logp_all.exp() * (next_q - alpha * logp_all)).sum(-1)
                targets = sums + discount * soft_v.gather(1, boot)
            q_all = module.q_values(critic_features())  # [E, N, L, n]
            q = q_all.gather(3, actions.view(1, N, L, 1).expand(q_all.shape[0], N, L, 1)).squeeze(-1)
        else:
            actions = sb.actions.float()
            noise = self.tensor(torch.randn((2, N, L + 1, module.action_dim), generator=self._generator))
            with torch.no_grad():
                next_actions, next_logp = squashed_gaussian_rsample(pi_all, noise[1])
                next_q = module.q_values(target_feats, next_actions, qf=self.target_qf).min(dim=0).values
                soft_v = next_q - alpha * next_logp  # [N, L + 1]
                targets = sums + discount * soft_v.gather(1, boot)
            q = module.q_values(critic_features(), actions)  # [E, N, L]
        td = q - targets.unsqueeze(0)
        critic_loss = 0.5 * masked_mean(td.pow(2), mask, sb.weights).sum()
        critic_norm = self.step_on("critic", critic_loss, self.critic_params, terms={"critic_loss": critic_loss})
        # Policy loss against the just-updated critics; only the policy gets gradients.
        with torch.no_grad():
            feats = critic_features()
        if module.discrete:
            logp = logp_all[:, :L]
            probs = logp.exp()
            with torch.no_grad():
                q_pi = module.q_values(feats).min(dim=0).values
            actor_loss = masked_mean((probs * (alpha * logp - q_pi)).sum(-1), mask)
            entropy = -(probs * logp).sum(-1).detach()
            alpha_loss = self.log_alpha * masked_mean(entropy - self.target_entropy, mask)
        else:
            new_actions, logp = squashed_gaussian_rsample(pi_all[:, :L], noise[0, :, :L])
            q_pi = module.q_values(feats, new_actions).min(dim=0).values
            actor_loss = masked_mean(alpha * logp - q_pi, mask)
            entropy = -logp.detach()
            alpha_loss = -self.log_alpha * masked_mean(logp.detach() + self.target_entropy, mask)
        actor_norm = self.step_on("actor", actor_loss, self.actor_params, terms={"actor_loss": actor_loss})
        self.step_on("alpha", alpha_loss, [self.log_alpha], terms={"alpha_loss": alpha_loss})
        self.num_grad_updates += 1
        self.maybe_update_targets(timestep, [(self.target_qf, module.qf)])
        return {
            "total_loss": (critic_loss + actor_loss).detach(),
            "critic_loss": critic_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha_loss": alpha_loss.detach(),
            "alpha_value": alpha,
            "entropy": masked_mean(entropy, mask),
            "qf_mean": masked_mean(q.detach().mean(dim=0), mask),
            "gradients_critic_global_norm": critic_norm,
            "gradients_actor_global_norm": actor_norm,
            "num_grad_updates": self.num_grad_updates,
            "td_error": sequence_priorities(td.detach().abs().mean(dim=0), mask, sb.order),
            **self.end_update(),
        }
