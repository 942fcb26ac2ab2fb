"""DDPG's and TD3's losses: (twin) Q-learning with target networks and a deterministic policy gradient.

One learner serves both algorithms; TD3 (Fujimoto et al., 2018) is DDPG with `twin_q`
(clipped double-Q targets), `policy_delay` (actor and target updates every few critic
updates) and `smooth_target_policy` (clipped noise on the target action).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner import Learner, make_target_network


class DDPGLearner(Learner):
    """Learner of DDPG and TD3 with optimizers "actor" and "critic" and target copies of both networks."""

    def configure_optimizers(self) -> None:
        """Separate optimizers (and learning rates) for the actor and the critics."""
        cfg = self.config
        self.actor_params = list(self.module.pi.parameters())
        self.critic_params = list(self.module.qf.parameters())
        self.add_optimizer("actor", self.actor_params, cfg.actor_lr)
        self.add_optimizer("critic", self.critic_params, cfg.critic_lr)

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.target_pi = make_target_network(module.pi)
        self.target_qf = make_target_network(module.qf)
        self.num_actor_updates = 0
        self._last_actor_loss = torch.tensor(math.nan, device=self.device)
        self._last_actor_norm = math.nan
        self._schedules_constant = all(s.is_constant for s in self.lr_schedules.values())
        self._generator = torch.Generator()
        self._generator.manual_seed(int(config.seed) + 37 if config.seed is not None else int(torch.seed() % 2**62))

    def compute_td_targets(self, batch: dict[str, np.ndarray]) -> torch.Tensor:
        """y = r + gamma**n_step * (1 - terminated) * min_E target_Q(s', a'), shape [B].

        a' = target_pi(s'); with smooth_target_policy, plus N(0, target_noise) clipped to
        +-target_noise_clip, then clipped to the action range [-1, 1].
        """
        cfg = self.config
        module = self.module
        next_obs = self.tensor(batch[Columns.NEXT_OBS])
        rewards = self.tensor(batch[Columns.REWARDS]).float()
        not_done = 1.0 - self.tensor(batch[Columns.TERMINATEDS]).float()
        n_step = self.tensor(np.asarray(batch.get("n_step", 1))).float()
        with torch.no_grad():
            next_actions = module.actions(next_obs, pi=self.target_pi)
            if cfg.smooth_target_policy:
                noise = self.tensor(torch.randn(next_actions.shape, generator=self._generator)) * cfg.target_noise
                noise = noise.clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
                next_actions = (next_actions + noise).clamp(-1.0, 1.0)
            next_q = module.q_values(next_obs, next_actions, qf=self.target_qf).min(dim=0).values
            return rewards + cfg.gamma ** n_step * not_done * next_q

    def critic_loss(self, q: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
        """Importance-weighted mean over the batch of the per-sample loss summed over critics, plus L2.

        The per-sample loss is 0.5 * td**2, or the Huber loss with `huber_threshold` when
        `use_huber`; the L2 term is `l2_reg * 0.5 * sum(w**2)` over the critics' weight
        matrices (not biases), as RLlib's `l2_reg`.
        """
        cfg = self.config
        td = q - targets.unsqueeze(0)
        if cfg.use_huber:
            per_sample = F.huber_loss(q, targets.unsqueeze(0).expand_as(q), reduction="none",
                                      delta=cfg.huber_threshold)
        else:
            per_sample = 0.5 * td.pow(2)
        per_sample = per_sample.sum(dim=0)
        if weights is not None:
            per_sample = per_sample * weights
        loss = per_sample.mean()
        if cfg.l2_reg > 0.0:
            loss = loss + cfg.l2_reg * 0.5 * sum(w.pow(2).sum() for w in self.module.qf.weights)
        return loss

    def actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """-Q1(s, pi(s)) averaged over the batch (the first critic only, as in TD3)."""
        module = self.module
        return -module.q_values(obs, module.actions(obs))[0].mean()

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One critic step; every `policy_delay` critic steps also an actor step and target updates.

        Returns metrics (tensors and numbers) and `td_error`, the per-item |TD error|
        (averaged over critics) as a NumPy array for prioritized replay.
        """
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._schedules_constant:
            self.set_lr_for_timestep(timestep)
        module = self.module
        obs = self.tensor(batch[Columns.OBS])
        actions = self.tensor(batch[Columns.ACTIONS]).float()
        weights = self.tensor(batch[Columns.WEIGHTS]).float() if Columns.WEIGHTS in batch else None
        targets = self.compute_td_targets(batch)
        q = module.q_values(obs, actions)
        critic_loss = self.critic_loss(q, targets, weights)
        critic_norm = self.step_on("critic", critic_loss, self.critic_params, terms={"critic_loss": critic_loss})
        self.num_grad_updates += 1
        if self.num_grad_updates % cfg.policy_delay == 0:
            # The actor follows the just-updated first critic; only its own parameters get gradients.
            actor_loss = self.actor_loss(obs)
            self._last_actor_norm = self.step_on("actor", actor_loss, self.actor_params,
                                                 terms={"actor_loss": actor_loss})
            self._last_actor_loss = actor_loss.detach()
            self.num_actor_updates += 1
            self.maybe_update_targets(timestep, [(self.target_pi, module.pi), (self.target_qf, module.qf)])
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": self._last_actor_loss,
            "qf_mean": q.detach().mean(),
            "qf_max": q.detach().max(),
            "qf_min": q.detach().min(),
            "gradients_critic_global_norm": critic_norm,
            "gradients_actor_global_norm": self._last_actor_norm,
            "num_grad_updates": self.num_grad_updates,
            "num_actor_updates": self.num_actor_updates,
            "td_error": (q.detach() - targets.unsqueeze(0)).abs().mean(dim=0).float().cpu().numpy(),
            **self.end_update(),
        }

    def get_extra_state(self) -> dict[str, Any]:
        """Critic-update count (which drives policy_delay), actor-update count, last target update."""
        return {**super().get_extra_state(), "num_actor_updates": self.num_actor_updates}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore get_extra_state()."""
        super().set_extra_state(state)
        self.num_actor_updates = int(state.get("num_actor_updates", 0))

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """Target actor and target critics."""
        out = {f"target_pi.{k}": v for k, v in self.target_pi.state_dict().items()}
        out.update({f"target_qf.{k}": v for k, v in self.target_qf.state_dict().items()})
        return out

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore get_extra_tensors() (tensors or NumPy arrays, as read from a checkpoint)."""
        for prefix, net in (("target_pi.", self.target_pi), ("target_qf.", self.target_qf)):
            own = {k[len(prefix):]: torch.as_tensor(v) for k, v in tensors.items() if k.startswith(prefix)}
            if not own:
                raise ValueError(f"the learner tensors lack the '{prefix[:-1]}' network")
            net.load_state_dict(own)
