"""DQN's loss: (double) Q-learning TD targets over n-step replay, or the C51 projection when
distributional, with importance weights from prioritized replay."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner import Learner, make_target_network

#: RLlib's result and batch key names of DQN's Learner (`ray.rllib.algorithms.dqn.dqn_learner`).
ATOMS = "atoms"
QF_LOSS_KEY = "qf_loss"
QF_LOGITS = "qf_logits"
QF_MEAN_KEY = "qf_mean"
QF_MAX_KEY = "qf_max"
QF_MIN_KEY = "qf_min"
QF_NEXT_PREDS = "qf_next_preds"
QF_TARGET_NEXT_PREDS = "qf_target_next_preds"
QF_TARGET_NEXT_PROBS = "qf_target_next_probs"
QF_PREDS = "qf_preds"
QF_PROBS = "qf_probs"
TD_ERROR_MEAN_KEY = "td_error_mean"


def project_distribution(next_probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor,
                         support: torch.Tensor) -> torch.Tensor:
    """Project the distribution `rewards + discounts * support` (probabilities `next_probs`)
    back onto `support` (C51's categorical projection); returns [B, num_atoms] target probabilities."""
    v_min, v_max = float(support[0]), float(support[-1])
    num_atoms = support.shape[0]
    delta = (v_max - v_min) / (num_atoms - 1)
    tz = (rewards.unsqueeze(1) + discounts.unsqueeze(1) * support.unsqueeze(0)).clamp(v_min, v_max)
    # Float error can put b a hair outside [0, num_atoms - 1]; ceil/floor must stay in range.
    b = ((tz - v_min) / delta).clamp(0, num_atoms - 1)
    lower = b.floor().long()
    upper = b.ceil().long()
    # When b lands exactly on an atom, lower == upper and both weights below are 0: give it all.
    same = lower == upper
    w_lower = (upper.to(b.dtype) - b) + same.to(b.dtype)
    w_upper = b - lower.to(b.dtype)
    target = torch.zeros_like(next_probs)
    target.scatter_add_(1, lower, next_probs * w_lower)
    target.scatter_add_(1, upper, next_probs * w_upper)
    return target


def td_loss(td_error: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-sample loss of TD errors: 'huber' (delta 1) or 'mse' (0.5 * error^2)."""
    if kind == "huber":
        return F.huber_loss(td_error, torch.zeros_like(td_error), reduction="none", delta=1.0)
    return 0.5 * td_error.pow(2)


class DQNLearner(Learner):
    """Learner of DQN and its Rainbow extensions (double Q, n-step, distributional, noisy, dueling)."""

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.target = make_target_network(module)
        self._lr_constant = self.lr_schedule.is_constant

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One gradient step on a replayed batch; returns metrics (tensors) and `td_error` (NumPy)."""
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._lr_constant:
            self.set_lr_for_timestep(timestep)
        obs, next_obs, rewards, discounts, weights = self.td_inputs(batch)
        actions = self.tensor(batch[Columns.ACTIONS]).long()
        module = self.module
        B = obs.shape[0]
        if cfg.double_q:
            both = module.q_outputs(torch.cat([obs, next_obs]), noisy=module.noisy)
            out, online_next = both[:B], both[B:].detach()
        else:
            out = module.q_outputs(obs, noisy=module.noisy)
            online_next = None
        with torch.no_grad():
            target_next = self.target.q_outputs(next_obs, noisy=module.noisy)
            next_q_target = module.q_values(target_next)
            chooser = module.q_values(online_next) if online_next is not None else next_q_target
            next_actions = chooser.argmax(dim=1, keepdim=True)
        rows = torch.arange(B, device=self.device)
        if module.num_atoms == 1:
            q_selected = out.gather(1, actions.unsqueeze(1)).squeeze(1)
            with torch.no_grad():
                next_q = next_q_target.gather(1, next_actions).squeeze(1)
                targets = rewards + discounts * next_q
            td_error = q_selected - targets
            per_sample = td_loss(td_error, cfg.td_error_loss_fn)
            q_mean = q_selected.detach().mean()
            abs_td = td_error.detach().abs()
        else:
            logp = torch.log_softmax(out[rows, actions], dim=-1)
            with torch.no_grad():
                next_probs = torch.softmax(target_next[rows, next_actions.squeeze(1)], dim=-1)
                target_probs = project_distribution(next_probs, rewards, discounts, module.support)
            per_sample = -(target_probs * logp).sum(-1)
            q_mean = (logp.detach().exp() * module.support).sum(-1).mean()
            abs_td = per_sample.detach()
        loss = (per_sample * weights).mean() if weights is not None else per_sample.mean()
        grad_norm = self.apply_loss(loss, terms={"qf_loss": loss})
        self.maybe_update_targets(timestep, [(self.target, self.rl_module)])
        return {
            "total_loss": loss.detach(),
            "qf_loss": loss.detach(),
            "qf_mean": q_mean,
            "gradients_default_optimizer_global_norm": grad_norm,
            "curr_lr": self.optimizer.param_groups[0]["lr"],
            "num_grad_updates": self.num_grad_updates,
            "td_error": abs_td.float().cpu().numpy(),
            **self.end_update(),
        }

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """The target network's weights."""
        return {f"target.{k}": v for k, v in self.target.state_dict().items()}

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Load the target network's weights."""
        state = {k[len("target."):]: torch.as_tensor(v) for k, v in tensors.items() if k.startswith("target.")}
        self.target.load_state_dict(state)
