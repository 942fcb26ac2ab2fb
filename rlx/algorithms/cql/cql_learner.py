"""CQL's losses: SAC's, plus the conservative penalty on the critics and behaviour cloning first.

Per critic Q_i, with N actions sampled per state s of the batch from each of: the uniform
distribution on [-1, 1]^d (density 0.5^d), the policy at s, and the policy at s' (the next
state), the penalty is

    min_q_weight * ( temperature * mean_s logsumexp_k [ (Q_i(s, a_k) - log p(a_k)) / temperature ]
                     - mean_(s, a) in data Q_i(s, a) )

(the CQL(H) objective of Kumar et al., 2020, with the sampled actions importance-weighted by
their log density p). It pushes Q down on actions the policy or chance would pick and up on the
data's actions. With `lagrangian`, the penalty is weighted by alpha' = exp(log_alpha_prime),
which rises while the penalty exceeds `lagrangian_thresh` and falls below it. For the first
`bc_iters` updates the policy loss is alpha * log pi(a~|s) - log pi(a_data|s) (behaviour
cloning with SAC's entropy term); afterwards it is SAC's.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlx.algorithms.sac.sac_learner import SACLearner, squashed_gaussian_rsample
from rlx.core.columns import Columns


def cql_penalty(q_data: torch.Tensor, q_rand: torch.Tensor, q_curr: torch.Tensor, q_next: torch.Tensor,
                logp_curr: torch.Tensor, logp_next: torch.Tensor, action_dim: int, temperature: float,
                min_q_weight: float) -> torch.Tensor:
    """The CQL penalty of each critic: shape [E].

    q_data: [E, B] Q-values of the data's actions; q_rand, q_curr, q_next: [E, N, B] Q-values at s
    of uniform actions, of actions from the policy at s, and from the policy at s'; logp_curr,
    logp_next: [N, B] the policy's log-probabilities of those sampled actions.
    """
    log_uniform = action_dim * math.log(0.5)
    sampled = torch.cat([q_rand - log_uniform, q_next - logp_next, q_curr - logp_curr], dim=1)
    pushed_down = temperature * torch.logsumexp(sampled / temperature, dim=1).mean(dim=-1)
    return min_q_weight * (pushed_down - q_data.mean(dim=-1))


class CQLLearner(SACLearner):
    """SAC's learner with the CQL penalty, behaviour-cloning warm-up and optional Lagrangian
    weight (optimizer "alpha_prime", at critic_lr)."""

    def configure_optimizers(self) -> None:
        """SAC's optimizers, and log-alpha' when `lagrangian`."""
        super().configure_optimizers()
        self.log_alpha_prime = torch.zeros((), device=self.device, requires_grad=True)
        if self.config.lagrangian:
            self.add_optimizer("alpha_prime", [self.log_alpha_prime], self.config.critic_lr)

    def _sampled_q_values(self, flat_obs: torch.Tensor, pi_out: torch.Tensor,
                          next_pi_out: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q_rand, q_curr, q_next) [E, N, B] and (logp_curr, logp_next) [N, B] of the penalty's
        sampled actions; only the Q-values carry gradients (to the critics)."""
        module, n = self.module, int(self.config.num_actions)
        batch, dim = flat_obs.shape[0], module.action_dim
        with torch.no_grad():
            rand = self.tensor(torch.rand((n, batch, dim), generator=self._generator)) * 2.0 - 1.0
            noise = self.tensor(torch.randn((2, n, batch, dim), generator=self._generator))
            curr, logp_curr = squashed_gaussian_rsample(pi_out.detach().expand(n, -1, -1), noise[0])
            nxt, logp_next = squashed_gaussian_rsample(next_pi_out.expand(n, -1, -1), noise[1])
        actions = torch.cat([rand, curr, nxt], dim=0).reshape(3 * n * batch, dim)
        obs = flat_obs.repeat(3 * n, 1)  # row k * B + b is state b, as in `actions`
        q = module.qf(torch.cat([obs, actions], dim=-1)).squeeze(-1).reshape(-1, 3 * n, batch)
        q_rand, q_curr, q_next = q.split(n, dim=1)
        return q_rand, q_curr, q_next, logp_curr, logp_next

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One critic (Bellman + CQL penalty), actor, alpha (and alpha') step on a replayed batch."""
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._schedules_constant:
            self.set_lr_for_timestep(timestep)
        module = self.module
        obs, next_obs, rewards, discounts, weights = self.td_inputs(batch)
        actions = self.tensor(batch[Columns.ACTIONS]).float()
        alpha = self.log_alpha.detach().exp()
        B, dim = obs.shape[0], module.action_dim
        pi_out = module.policy_outputs(obs)
        with torch.no_grad():
            next_pi_out = module.policy_outputs(next_obs)
        flat_obs, flat_next_obs = module.flat_obs(obs), module.flat_obs(next_obs)

        # Critics: the Bellman error plus the conservative penalty.
        noise = self.tensor(torch.randn((2, B, dim), generator=self._generator))
        with torch.no_grad():
            next_actions, next_logp = squashed_gaussian_rsample(next_pi_out, noise[0])
            next_q = self.target_qf(torch.cat([flat_next_obs, next_actions], dim=-1)).squeeze(-1).min(dim=0).values
            if not cfg.deterministic_backup:
                next_q = next_q - alpha * next_logp
            targets = rewards + discounts * next_q
        q = module.q_values(obs, actions)
        td = q - targets.unsqueeze(0)
        sq = td.pow(2) if weights is None else td.pow(2) * weights
        bellman = sq.mean(dim=1)
        penalty = cql_penalty(q, *self._sampled_q_values(flat_obs, pi_out, next_pi_out), action_dim=dim,
                              temperature=cfg.temperature, min_q_weight=cfg.min_q_weight)
        alpha_prime = self.log_alpha_prime.exp().clamp(0.0, 1e6)
        if cfg.lagrangian:
            weighted_penalty = alpha_prime.detach() * (penalty - cfg.lagrangian_thresh)
        else:
            weighted_penalty = penalty
        critic_loss = (bellman + weighted_penalty).sum()
        critic_norm = self.step_on("critic", critic_loss, self.critic_params,
                                   terms={"critic_loss": critic_loss, "cql_loss": penalty.sum()})

        # Policy: behaviour cloning for the first bc_iters updates, then SAC's loss.
        new_actions, logp = squashed_gaussian_rsample(pi_out, noise[1])
        bc_phase = self.num_grad_updates < cfg.bc_iters
        if bc_phase:
            data_logp = module.get_train_action_dist_cls().from_logits(pi_out).logp(actions)
            actor_loss = (alpha * logp - data_logp).mean()
        else:
            q_pi = module.q_values(obs, new_actions).min(dim=0).values
            actor_loss = (alpha * logp - q_pi).mean()
        actor_norm = self.step_on("actor", actor_loss, self.actor_params, terms={"actor_loss": actor_loss})
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.step_on("alpha", alpha_loss, [self.log_alpha], terms={"alpha_loss": alpha_loss})
        extra = {}
        if cfg.lagrangian:
            alpha_prime_loss = -(alpha_prime * (penalty.detach() - cfg.lagrangian_thresh)).mean()
            self.step_on("alpha_prime", alpha_prime_loss, [self.log_alpha_prime],
                         terms={"alpha_prime_loss": alpha_prime_loss})
            extra = {"alpha_prime_loss": alpha_prime_loss.detach(), "alpha_prime_value": alpha_prime.detach()}
        self.num_grad_updates += 1
        self.maybe_update_targets(timestep, [(self.target_qf, module.qf)])
        return {
            "total_loss": (critic_loss + actor_loss).detach(),
            "critic_loss": critic_loss.detach(),
            "cql_loss": penalty.detach().mean(),
            "actor_loss": actor_loss.detach(),
            "alpha_loss": alpha_loss.detach(),
            "alpha_value": alpha,
            "entropy": (-logp.detach()).mean(),
            "qf_mean": q.detach().mean(),
            "bc_phase": float(bc_phase),
            "gradients_critic_global_norm": critic_norm,
            "gradients_actor_global_norm": actor_norm,
            "num_grad_updates": self.num_grad_updates,
            "td_error": td.detach().abs().mean(dim=0).float().cpu().numpy(),
            **extra,
            **self.end_update(),
        }

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """SAC's (target critics, log-alpha) and log-alpha'."""
        out = super().get_extra_tensors()
        out["log_alpha_prime"] = self.log_alpha_prime.detach().reshape(1)
        return out

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore get_extra_tensors()."""
        super().set_extra_tensors(tensors)
        if "log_alpha_prime" in tensors:
            with torch.no_grad():
                self.log_alpha_prime.copy_(torch.as_tensor(tensors["log_alpha_prime"]).reshape(()))
