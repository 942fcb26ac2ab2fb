"""PPO on recurrent (stateful) modules: the time-major train batch is cut into sequences.

Each sub-env column of the batch is cut into sequences of at most `max_seq_len` steps (and at
episode ends and padding); a sequence starts from the module state the EnvRunner had before its
first step. Values for GAE come from running the module over each sequence plus the observation
after its last step (the bootstrap value); the loss is PPO's (`compute_loss_for_module`) over the
sequences' real steps, minibatches holding whole sequences.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.env.env_runner import state_column
from rlx.utils.postprocessing import compute_gae, discounted_returns
from rlx.core.learner.device import module_device, to_device


@dataclass
class Sequences:
    """Where each sequence's steps are in the [T, B] batch: row/column indices [N, L] (padded
    steps repeat the first one), the real-step mask [N, L] and each sequence's length [N]."""

    t_idx: np.ndarray
    b_idx: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray

    def gather(self, column: np.ndarray) -> np.ndarray:
        """A [T, B, ...] column as [N, L, ...] sequences."""
        return column[self.t_idx, self.b_idx]


def cut_sequences(batch: dict[str, np.ndarray], max_seq_len: int) -> Sequences:
    """The sequences of a time-major batch: per column, cut after episode ends, before padding
    rows and every `max_seq_len` steps."""
    rewards = batch[Columns.REWARDS]
    T, B = rewards.shape[:2]
    ends = np.asarray(batch[Columns.TERMINATEDS], bool) | np.asarray(batch[Columns.TRUNCATEDS], bool)
    valid = np.asarray(batch[Columns.VALID], bool) if Columns.VALID in batch else np.ones((T, B), bool)
    starts: list[tuple[int, int, int]] = []  # (column, first row, length)
    for b in range(B):
        t = 0
        while t < T:
            if not valid[t, b]:
                t += 1
                continue
            length = 1
            while (length < max_seq_len and t + length < T and valid[t + length, b]
                   and not ends[t + length - 1, b]):
                length += 1
            starts.append((b, t, length))
            t += length
    N = len(starts)
    L = max(length for _, _, length in starts) if starts else 1
    steps = np.arange(L)
    cols = np.array([s[0] for s in starts], np.int64)
    firsts = np.array([s[1] for s in starts], np.int64)
    lengths = np.array([s[2] for s in starts], np.int64)
    mask = steps[None, :] < lengths[:, None]
    t_idx = np.where(mask, firsts[:, None] + steps[None, :], firsts[:, None])
    b_idx = np.repeat(cols[:, None], L, axis=1)
    return Sequences(t_idx, b_idx, mask, lengths)


def _state_in(batch: dict[str, np.ndarray], seqs: Sequences, keys: list[str]) -> dict[str, np.ndarray]:
    first_t, first_b = seqs.t_idx[:, 0], seqs.b_idx[:, 0]
    return {k: batch[state_column(k)][first_t, first_b] for k in keys}


@torch.no_grad()
def sequence_values(module: Any, batch: dict[str, np.ndarray], seqs: Sequences,
                    state_in: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(V(s_t), V(s_{t+1})) as [T, B]: the module run over each sequence and the observation
    after its last step."""
    obs = seqs.gather(batch[Columns.OBS])
    N, L = seqs.mask.shape
    extended = np.concatenate([obs, np.zeros_like(obs[:, :1])], axis=1)
    last_t = seqs.t_idx[np.arange(N), seqs.lengths - 1]
    extended[np.arange(N), seqs.lengths] = batch[Columns.NEXT_OBS][last_t, seqs.b_idx[:, 0]]
    device = module_device(module)
    out = module.compute_values({
        Columns.OBS: to_device(torch.from_numpy(np.ascontiguousarray(extended, np.float32)), device),
        Columns.STATE_IN: {k: to_device(torch.from_numpy(v), device) for k, v in state_in.items()}})
    values_ext = out.cpu().numpy().reshape(N, L + 1)
    T, B = batch[Columns.REWARDS].shape[:2]
    values, next_values = np.zeros((T, B), np.float32), np.zeros((T, B), np.float32)
    m = seqs.mask
    values[seqs.t_idx[m], seqs.b_idx[m]] = values_ext[:, :L][m]
    next_values[seqs.t_idx[m], seqs.b_idx[m]] = values_ext[:, 1:][m]
    return values, next_values


def recurrent_advantages(learner: Any, batch: dict[str, np.ndarray], seqs: Sequences,
                         state_in: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(advantages, value targets, value predictions), each [T, B]."""
    cfg = learner.config
    rewards = batch[Columns.REWARDS]
    term = np.asarray(batch[Columns.TERMINATEDS], bool)
    dones = term | np.asarray(batch[Columns.TRUNCATEDS], bool)
    if Columns.VALID in batch:
        dones = dones | ~np.asarray(batch[Columns.VALID], bool)
    dones = dones.copy()
    dones[-1] = True  # the rollout's end: bootstrapped from the next observation's value
    if not cfg.use_critic:
        zeros = np.zeros_like(rewards)
        returns = discounted_returns(rewards, zeros, term, dones, cfg.gamma)
        return returns, returns, zeros
    values, next_values = sequence_values(learner.rl_module, batch, seqs, state_in)
    if cfg.use_gae:
        adv, targets = compute_gae(rewards, values, next_values, term, dones, cfg.gamma, cfg.lambda_)
    else:
        targets = discounted_returns(rewards, next_values, term, dones, cfg.gamma)
        adv = targets - values
    return adv, targets, values


def recurrent_update(learner: Any, batch: dict[str, np.ndarray], timestep: int) -> dict[str, float]:
    """PPO's update of a recurrent module on a time-major batch (see the module docstring)."""
    cfg = learner.config
    learner.begin_update(batch, timestep)
    module = learner.rl_module
    keys = list(module.get_initial_state())
    max_seq_len = int(module.model_config.get("max_seq_len", 20) or 20)
    seqs = cut_sequences(batch, max_seq_len)
    state_in = _state_in(batch, seqs, keys)
    adv, targets, vf_preds = recurrent_advantages(learner, batch, seqs, state_in)
    real = seqs.mask
    seq_adv = seqs.gather(adv)
    if real.sum() > 1:
        mean, std = float(seq_adv[real].mean()), float(seq_adv[real].std())
        seq_adv = (seq_adv - mean) / max(std, 1e-4)
    columns = {
        Columns.OBS: seqs.gather(batch[Columns.OBS]),
        Columns.ACTIONS: seqs.gather(batch[Columns.ACTIONS]),
        Columns.ACTION_LOGP: seqs.gather(batch[Columns.ACTION_LOGP]),
        Columns.ACTION_DIST_INPUTS: seqs.gather(batch[Columns.ACTION_DIST_INPUTS]),
        Columns.ADVANTAGES: seq_adv.astype(np.float32),
        Columns.VALUE_TARGETS: seqs.gather(targets).astype(np.float32),
    }
    tensors = {k: learner.tensor(np.ascontiguousarray(v)) for k, v in columns.items()}
    states = {k: learner.tensor(np.ascontiguousarray(v)) for k, v in state_in.items()}
    mask_t = learner.tensor(real)
    lr = learner.set_lr_for_timestep(timestep)
    learner._curr_entropy_coeff = learner.entropy_schedule.value(timestep)
    one_optimizer = learner.uses_one_optimizer()
    N, L = real.shape
    per_minibatch = max(1, min(N, int(cfg.minibatch_size) // L))
    stats_rows: list[torch.Tensor] = []
    stat_names: list[str] = []
    grad_norms = 0.0
    order = np.arange(N)
    for _ in range(cfg.num_epochs):
        if cfg.shuffle_batch_per_epoch:
            order = learner._rng.permutation(N)
        for start in range(0, N, per_minibatch):
            idx = learner.tensor(order[start:start + per_minibatch])
            m = mask_t.index_select(0, idx)
            seq_batch = {Columns.OBS: tensors[Columns.OBS].index_select(0, idx),
                         Columns.STATE_IN: {k: v.index_select(0, idx) for k, v in states.items()}}
            fwd = module.forward_train(seq_batch)
            fwd_rows = {Columns.ACTION_DIST_INPUTS: fwd[Columns.ACTION_DIST_INPUTS][m]}
            if cfg.use_critic:
                values = fwd.get(Columns.VF_PREDS)
                if values is None:
                    values = module.compute_values(seq_batch, embeddings=fwd.get(Columns.EMBEDDINGS)) \
                        if Columns.EMBEDDINGS in fwd else module.compute_values(seq_batch)
                fwd_rows[Columns.VF_PREDS] = values[m]
            rows = {k: v.index_select(0, idx)[m] for k, v in tensors.items()}
            learner._loss_stats = None
            loss = learner.compute_loss_for_module(module_id=learner.module_id, config=cfg, batch=rows,
                                                   fwd_out=fwd_rows)
            grad_norms += learner.step_minibatch(loss, one_optimizer, stats_rows, stat_names)
    return learner.update_metrics(stats_rows, stat_names, grad_norms, lr, seqs.gather(targets)[real],
                                  seqs.gather(vf_preds)[real])
