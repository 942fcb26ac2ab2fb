"""Recurrent DQN's loss (R2D2, Kapturowski et al. 2019): DQN's (double) Q-learning on replayed
sequences, unrolled from the state stored with each sequence.

Per sequence: the online network runs its burn-in steps without gradients (only to warm up the
stored state), then the rest with gradients; the target network runs the whole sequence. The
n-step target of step t sums the rewards of steps t .. t+m-1 (m = min(n, steps left in the
sequence)) and bootstraps from Q_target(o_{t+m}), the double-Q action picked by the online
network. Only `loss_mask` steps (real steps after the burn-in) count; each sequence's new
priority is eta * max|td| + (1 - eta) * mean|td| over them.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.dqn.dqn_learner import DQNLearner, td_loss
from rlx.algorithms.recurrent_replay import burn_in_groups, nstep_targets, sequence_priorities
from rlx.core.columns import Columns
from rlx.utils.replay_buffers.sequence_replay_buffer import BURN_IN, SEQ_LENS, STATE_PREFIX

class RecurrentDQNLearner(DQNLearner):
    """Learner of recurrent DQN (model use_lstm=True) on SequenceReplayBuffer batches."""

    supports_recurrent_modules = True

    def _unroll(self, net: Any, obs: torch.Tensor, state: dict[str, torch.Tensor], burn_in: int,
                noisy: bool) -> torch.Tensor:
        """Q-values [N, L + 1, A]; the first `burn_in` steps run without gradients."""
        if burn_in == 0:
            return net.q_outputs(obs, state, noisy=noisy)[0]
        with torch.no_grad():
            q_burn, state = net.q_outputs(obs[:, :burn_in], state, noisy=noisy)
        q_rest, _ = net.q_outputs(obs[:, burn_in:], state, noisy=noisy)
        return torch.cat([q_burn, q_rest], dim=1)

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One gradient step on replayed sequences; returns metrics and per-sequence priorities
        as `td_error` (NumPy, in the batch's order)."""
        cfg = self.config
        self.begin_update(batch, timestep)
        if not self._lr_constant:
            self.set_lr_for_timestep(timestep)
        module = self.module
        noisy = module.noisy
        # Sequences grouped by burn-in length (burn_in_len, or 0 at an episode's start): each
        # group unrolls its burn-in steps without gradients in one pass.
        order, groups = burn_in_groups(batch[BURN_IN])

        def col(name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
            return self.tensor(np.ascontiguousarray(np.asarray(batch[name])[order]), dtype)

        obs = col(Columns.OBS, torch.float32)
        actions = col(Columns.ACTIONS).long()
        rewards = col(Columns.REWARDS, torch.float32)
        terminated = col(Columns.TERMINATEDS).bool()
        seq_lens = col(SEQ_LENS).long()
        mask = col(Columns.LOSS_MASK).bool()
        state = self._state_in(batch, order)
        if getattr(cfg, "zero_init_states", False):
            state = {k: torch.zeros_like(v) for k, v in state.items()}
        weights = col(Columns.WEIGHTS, torch.float32) if Columns.WEIGHTS in batch else None
        n_step = int(np.asarray(batch.get("n_step", 1)).reshape(-1)[0])

        parts = []
        for burn_in, lo, hi in groups:
            parts.append(self._unroll(module, obs[lo:hi], {k: v[lo:hi] for k, v in state.items()}, burn_in, noisy))
        q_all = torch.cat(parts) if len(parts) > 1 else parts[0]  # [N, L + 1, A]
        L = actions.shape[1]
        q_selected = q_all[:, :L].gather(2, actions.unsqueeze(2)).squeeze(2)
        with torch.no_grad():
            sums, boot, discount = nstep_targets(rewards, seq_lens, terminated, n_step, cfg.gamma)
            q_target_all, _ = self.target.q_outputs(obs, state, noisy=noisy)
            index = boot.unsqueeze(2).expand(-1, -1, q_target_all.shape[2])
            q_target_boot = q_target_all.gather(1, index)  # [N, L, A]: Q_target(o_{t+m})
            chooser = q_all.detach().gather(1, index) if cfg.double_q else q_target_boot
            next_q = q_target_boot.gather(2, chooser.argmax(dim=2, keepdim=True)).squeeze(2)
            targets = sums + discount * next_q
        td_error = (q_selected - targets) * mask
        per_step = td_loss(td_error, cfg.td_error_loss_fn) * mask
        count = mask.sum(dim=1).clamp(min=1)
        per_seq = per_step.sum(dim=1) / count
        if weights is not None:
            per_seq = per_seq * weights
        loss = per_seq.sum() / max(1, int((mask.sum(dim=1) > 0).sum()))
        grad_norm = self.apply_loss(loss, terms={"qf_loss": loss})
        self.maybe_update_targets(timestep, [(self.target, self.rl_module)])
        with torch.no_grad():
            q_mean = (q_selected.detach() * mask).sum() / mask.sum().clamp(min=1)
        priorities = sequence_priorities(td_error.detach().abs(), mask, order)
        return {
            "total_loss": loss.detach(),
            "qf_loss": loss.detach(),
            "qf_mean": q_mean,
            "gradients_default_optimizer_global_norm": grad_norm,
            "curr_lr": self.optimizer.param_groups[0]["lr"],
            "num_grad_updates": self.num_grad_updates,
            "td_error": priorities,
            **self.end_update(),
        }

    def _state_in(self, batch: dict[str, np.ndarray], order: np.ndarray) -> dict[str, torch.Tensor]:
        return {k[len(STATE_PREFIX):]: self.tensor(np.ascontiguousarray(np.asarray(v)[order]), torch.float32)
                for k, v in batch.items() if k.startswith(STATE_PREFIX)}
