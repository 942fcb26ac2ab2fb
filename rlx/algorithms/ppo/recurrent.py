"""PPO on recurrent (stateful) modules: the time-major train batch is cut into sequences.

Each sub-env column of the batch is cut into sequences of at most `max_seq_len` steps (and at
episode ends and padding); a sequence starts from the module state the EnvRunner had before its
first step. Values for GAE come from running the module over each sequence plus the observation
after its last step (the bootstrap value); the loss is PPO's (`compute_loss_for_module`) over the
sequences' real steps, minibatches holding whole sequences.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.learner.sequences import Sequences, cut_sequences, max_seq_len, sequence_state_in, sequence_values
from rlx.utils.postprocessing import advantages_from_values, estimate_advantages

__all__ = ["Sequences", "cut_sequences", "recurrent_advantages", "recurrent_update", "sequence_values"]


def recurrent_advantages(learner: Any, batch: dict[str, np.ndarray], seqs: Sequences,
                         state_in: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(advantages, value targets, value predictions), each [T, B]: rlx's one advantage estimation
    (rlx.utils.postprocessing) with values from running the module over each sequence."""
    cfg = learner.config
    if not cfg.use_critic:
        return estimate_advantages(None, batch, gamma=cfg.gamma, use_critic=False)
    values, next_values = sequence_values(learner.rl_module, batch, seqs, state_in)
    adv, targets = advantages_from_values(batch, values, next_values, gamma=cfg.gamma, lambda_=cfg.lambda_,
                                          use_gae=cfg.use_gae)
    return adv, targets, values


def recurrent_update(learner: Any, batch: dict[str, np.ndarray], timestep: int) -> dict[str, float]:
    """PPO's update of a recurrent module on a time-major batch (see the module docstring)."""
    cfg = learner.config
    learner.begin_update(batch, timestep)
    module = learner.rl_module
    keys = list(module.get_initial_state())
    seqs = cut_sequences(batch, max_seq_len(module))
    state_in = sequence_state_in(batch, seqs, keys)
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
