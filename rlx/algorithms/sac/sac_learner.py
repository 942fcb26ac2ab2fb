"""SAC's losses: twin-Q soft Bellman targets, the reparameterized policy loss, and automatic
entropy tuning; for squashed-Gaussian (Box) and categorical (Discrete) policies."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner import Learner, make_target_network

#: RLlib's result and batch key names of SAC's Learner (`ray.rllib.algorithms.sac.sac_learner`).
LOGPS_KEY = "logps"
QF_LOSS_KEY = "qf_loss"
QF_MEAN_KEY = "qf_mean"
QF_MAX_KEY = "qf_max"
QF_MIN_KEY = "qf_min"
QF_PREDS = "qf_preds"
QF_TWIN_LOSS_KEY = "qf_twin_loss"
QF_TWIN_PREDS = "qf_twin_preds"
TD_ERROR_MEAN_KEY = "td_error_mean"
CRITIC_TARGET = "critic_target"
ACTION_DIST_INPUTS_NEXT = "action_dist_inputs_next"
QF_TARGET_NEXT = "q_target_next"
ACTION_PROBS_NEXT = "action_probs_next"

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def squashed_gaussian_rsample(dist_inputs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterized tanh-Gaussian sample in (-1, 1) and its log-probability (summed over action dims)."""
    mean, log_std = dist_inputs.chunk(2, dim=-1)
    pre_tanh = mean + log_std.exp() * noise
    action = torch.tanh(pre_tanh)
    gauss_logp = -0.5 * noise.pow(2) - log_std - 0.5 * _LOG_2PI
    # log(1 - tanh(u)^2) written stably as 2 * (log 2 - u - softplus(-2u)).
    log_det = 2.0 * (_LOG_2 - pre_tanh - F.softplus(-2.0 * pre_tanh))
    return action, (gauss_logp - log_det).sum(-1)


class SACLearner(Learner):
    """Learner of Soft Actor-Critic with optimizers "actor", "critic" and "alpha"."""

    def configure_optimizers(self) -> None:
        """Separate optimizers (and learning rates) for the policy, the critics and log-alpha."""
        cfg = self.config
        module = self.module
        self.actor_params = list(module.pi.parameters())
        self.critic_params = list(module.qf.parameters())
        self.log_alpha = torch.tensor(math.log(cfg.initial_alpha), device=self.device, requires_grad=True)
        self.add_optimizer("actor", self.actor_params, cfg.actor_lr)
        self.add_optimizer("critic", self.critic_params, cfg.critic_lr)
        self.add_optimizer("alpha", [self.log_alpha], cfg.alpha_lr)

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.target_qf = make_target_network(module.qf)
        if config.target_entropy == "auto":
            n = module.action_dim
            # Discrete: half the maximum entropy. RLlib's 0.98 * log(n) lies so close to the
            # maximum that alpha grows without bound while the policy stays near uniform
            # (measured on CartPole: alpha 2e5 after 20k steps, return ~35).
            self.target_entropy = 0.5 * math.log(n) if module.discrete else -float(n)
        else:
            self.target_entropy = float(config.target_entropy)
        self._schedules_constant = all(s.is_constant for s in self.lr_schedules.values())
        self._generator = torch.Generator()
        self._generator.manual_seed(int(config.seed) + 31 if config.seed is not None else int(torch.seed() % 2**62))

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One critic, actor and alpha step on a replayed batch; returns metrics and `td_error`."""
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._schedules_constant:
            self.set_lr_for_timestep(timestep)
        module = self.module
        obs, next_obs, rewards, discounts, weights = self.td_inputs(batch)
        alpha = self.log_alpha.detach().exp()
        B = obs.shape[0]
        pi_out = module.policy_outputs(obs)
        with torch.no_grad():
            next_pi_out = module.policy_outputs(next_obs)
        next_obs = module.flat_obs(next_obs)  # what the (target) Q-networks read
        if module.discrete:
            actions = self.tensor(batch[Columns.ACTIONS]).long()
            logp = torch.log_softmax(pi_out, dim=-1)
            probs = logp.exp()
            with torch.no_grad():
                next_logp = torch.log_softmax(next_pi_out, dim=-1)
                next_q = self.target_qf(next_obs).min(dim=0).values
                next_v = (next_logp.exp() * (next_q - alpha * next_logp)).sum(-1)
                targets = rewards + discounts * next_v
            q_all = module.q_values(obs)
            q = q_all.gather(2, actions.view(1, B, 1).expand(q_all.shape[0], B, 1)).squeeze(-1)
        else:
            actions = self.tensor(batch[Columns.ACTIONS]).float()
            noise = self.tensor(torch.randn((2, B, module.action_dim), generator=self._generator))
            new_actions, logp = squashed_gaussian_rsample(pi_out, noise[0])
            with torch.no_grad():
                next_actions, next_logp = squashed_gaussian_rsample(next_pi_out, noise[1])
                next_q = self.target_qf(torch.cat([next_obs, next_actions], dim=-1)).squeeze(-1).min(dim=0).values
                targets = rewards + discounts * (next_q - alpha * next_logp)
            q = module.q_values(obs, actions)
        td = q - targets.unsqueeze(0)
        sq = td.pow(2)
        if weights is not None:
            sq = sq * weights
        critic_loss = 0.5 * sq.mean(dim=1).sum()
        critic_norm = self.step_on("critic", critic_loss, self.critic_params, terms={"critic_loss": critic_loss})
        # Policy loss against the just-updated critics; only the policy gets gradients.
        if module.discrete:
            with torch.no_grad():
                q_pi = module.q_values(obs).min(dim=0).values
            actor_loss = (probs * (alpha * logp - q_pi)).sum(-1).mean()
            entropy = -(probs * logp).sum(-1).detach()
            alpha_loss = self.log_alpha * (entropy - self.target_entropy).mean()
        else:
            q_pi = module.q_values(obs, new_actions).min(dim=0).values
            actor_loss = (alpha * logp - q_pi).mean()
            entropy = -logp.detach()
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
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
            "entropy": entropy.mean(),
            "qf_mean": q.detach().mean(),
            "gradients_critic_global_norm": critic_norm,
            "gradients_actor_global_norm": actor_norm,
            "num_grad_updates": self.num_grad_updates,
            "td_error": td.detach().abs().mean(dim=0).float().cpu().numpy(),
            **self.end_update(),
        }

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """Target critics and log-alpha."""
        out = {f"target_qf.{k}": v for k, v in self.target_qf.state_dict().items()}
        out["log_alpha"] = self.log_alpha.detach().reshape(1)
        return out

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore get_extra_tensors()."""
        if "log_alpha" not in tensors:
            raise ValueError("the learner tensors lack 'log_alpha'")
        self.target_qf.load_state_dict({k[len("target_qf."):]: torch.as_tensor(v) for k, v in tensors.items()
                                        if k.startswith("target_qf.")})
        with torch.no_grad():
            self.log_alpha.copy_(torch.as_tensor(tensors["log_alpha"]).reshape(()))
