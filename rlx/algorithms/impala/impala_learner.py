"""IMPALA's Learner: the V-trace actor-critic loss on time-major train batches."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.impala.vtrace import vtrace
from rlx.algorithms.ppo.ppo_learner import bootstrap_mask, episode_dones
from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from rlx.core.learner.sequences import SequenceLayout, sequence_values
from rlx.core.learner.torch.torch_learner import TorchLearner
from rlx.core.rl_module.apis import value_function
from rlx.utils.schedules import PiecewiseSchedule

#: Batch columns the learner adds: where a trajectory is cut after a step (terminated, truncated
#: or padding), and where V(s_{t+1}) comes from the stored next observation, not the next row.
DONES = "dones"
NEEDS_BOOTSTRAP = "needs_bootstrap"


class IMPALALearner(TorchLearner):
    """Importance-weighted actor-learner loss (Espeholt et al., 2018), mean over valid steps:

        policy_loss = -log pi(a_t|x_t) * A_t          (A_t: V-trace policy-gradient advantage)
        vf_loss     = 0.5 * (V(x_t) - v_t)^2          (v_t: V-trace value target)
        total       = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * H[pi(.|x_t)]

    `update_from_batch` runs `num_epochs` passes over the batch in minibatches of whole
    trajectories (`minibatch_size` env steps; None: the whole batch). Each minibatch reaches
    `compute_loss_for_module(module_id=, config=, batch=, fwd_out=)` time-major ([T, B] columns:
    obs, actions, action_logp of the sampling policy, rewards, terminateds, `dones`,
    `needs_bootstrap`, `values_bootstrapped` = V(next obs) where the trajectory was cut, from
    the weights at the start of the update, `loss_mask`) with the module's `forward_train`
    output on the flattened [T * B] observations.

    A recurrent (stateful) module runs over sequences instead (`forward_minibatch`): each
    trajectory column is cut after episode ends, before padding and every `max_seq_len` steps
    (rlx.core.learner.sequences), each sequence starts from the state the EnvRunner stored
    before its first step, and the outputs go back to the flat [T * B] rows, so V-trace and the
    loss see the same time-major layout as for a feed-forward module. The values of the
    observations after a cut come from the module run on from the end of their sequence.
    """

    #: IMPALA and APPO train recurrent (stateful) modules on sequences (see above).
    supports_recurrent_modules = True
    #: Advantages are estimated along each trajectory of the time-major batch.
    trains_on_time_major_batches = True

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.entropy_schedule = PiecewiseSchedule(config.entropy_coeff)
        self.dist_cls = self.rl_module.get_train_action_dist_cls()
        self._rng = np.random.default_rng(None if config.seed is None else int(config.seed) + 11)
        self._curr_entropy_coeff = 0.0
        # The loss terms (detached) of the last compute_loss_for_module call.
        self._loss_stats: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------ update

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """`num_epochs` passes of minibatch SGD on the V-trace loss; returns the mean loss terms."""
        cfg = self.config
        self.begin_update(batch, timestep)
        lr = self.set_lr_for_timestep(timestep)
        self._curr_entropy_coeff = self.entropy_schedule.value(timestep)
        layout = self.sequence_layout(batch)
        data = self.loss_inputs(batch, layout)
        T, B = data[Columns.REWARDS].shape
        columns = B if cfg.minibatch_size is None else max(1, min(B, int(cfg.minibatch_size) // T))
        rows: list[torch.Tensor] = []
        names: list[str] = []
        grad_norm = 0.0
        for _ in range(cfg.num_epochs):
            order = self._rng.permutation(B) if columns < B else np.arange(B)
            for start in range(0, B, columns):
                chosen = order[start:start + columns]
                index = self.tensor(chosen)
                minibatch = {k: v.index_select(1, index) for k, v in data.items()}
                fwd_out = self.forward_minibatch(minibatch, None if layout is None else layout.for_columns(chosen))
                loss = self.compute_loss_for_module(module_id=self.module_id, config=cfg, batch=minibatch,
                                                    fwd_out=fwd_out)
                stats = {**self._loss_stats, "total_loss": loss.detach()}
                grad_norm += self.apply_loss_to_all_optimizers(loss, terms=stats)
                names = names or list(stats)
                rows.append(torch.stack([stats[k] for k in names]))
        metrics: dict[str, Any] = dict(zip(names, torch.stack(rows).mean(0).tolist()))
        metrics.update(gradients_global_norm=grad_norm / len(rows), curr_lr=lr,
                       curr_entropy_coeff=self._curr_entropy_coeff, num_minibatch_updates=len(rows))
        metrics.update(self.after_update(metrics))
        metrics.update(self.end_update())
        return metrics

    def sequence_layout(self, batch: dict[str, np.ndarray]) -> SequenceLayout | None:
        """The batch's sequences and their stored start states for a recurrent module (None for a
        feed-forward one)."""
        if not self.rl_module.is_stateful():
            return None
        return SequenceLayout.of(batch, self.rl_module, self.device)

    def forward_minibatch(self, minibatch: dict[str, torch.Tensor],
                          layout: SequenceLayout | None = None) -> dict[str, Any]:
        """The module's forward_train output on a time-major minibatch, as flat [T * B] rows: one
        pass over the flattened steps, or (recurrent modules, `layout` = the minibatch's
        sequences) one pass over the sequences, with `vf_preds` always filled in."""
        if layout is None:
            return self.rl_module.forward_train(flat_columns(minibatch))
        module = self.rl_module
        T = minibatch[Columns.REWARDS].shape[0]
        inputs = layout.inputs(minibatch[Columns.OBS])
        out = module.forward_train(inputs)
        values = out.get(Columns.VF_PREDS)
        if values is None:
            compute_values = value_function(module, "The IMPALA/APPO loss")
            values = compute_values(inputs, embeddings=out[Columns.EMBEDDINGS]) \
                if Columns.EMBEDDINGS in out else compute_values(inputs)
        return {Columns.ACTION_DIST_INPUTS: layout.to_time_major(out[Columns.ACTION_DIST_INPUTS], T),
                Columns.VF_PREDS: layout.to_time_major(values, T)}

    def loss_inputs(self, batch: dict[str, np.ndarray],
                    layout: SequenceLayout | None = None) -> dict[str, torch.Tensor]:
        """The time-major [T, B] tensors the loss reads, built once per update (the values of the
        observations that follow a cut come from the weights at the update's start; a recurrent
        module's from its run over `layout`'s sequences, made here when not given)."""
        valid = batch.get(Columns.VALID)
        needs_bootstrap = bootstrap_mask(batch)
        if layout is None:
            layout = self.sequence_layout(batch)
        data = {
            Columns.OBS: self.tensor(np.ascontiguousarray(batch[Columns.OBS], np.float32)),
            Columns.VALUES_BOOTSTRAPPED: self._bootstrap_values(batch, needs_bootstrap, layout),
            Columns.ACTIONS: self.tensor(np.ascontiguousarray(batch[Columns.ACTIONS])),
            Columns.ACTION_LOGP: self.tensor(np.asarray(batch[Columns.ACTION_LOGP], np.float32)),
            Columns.REWARDS: self.tensor(np.asarray(batch[Columns.REWARDS], np.float32)),
            Columns.TERMINATEDS: self.tensor(np.asarray(batch[Columns.TERMINATEDS], bool)),
            # Cut after the last real step before padding too, so the padding rows add nothing to it.
            DONES: self.tensor(episode_dones(batch) | needs_bootstrap),
            NEEDS_BOOTSTRAP: self.tensor(needs_bootstrap),
            Columns.LOSS_MASK: self.tensor(np.ones(batch[Columns.REWARDS].shape, np.float32) if valid is None
                                           else valid.astype(np.float32)),
        }
        for key in (Columns.ADVANTAGES, Columns.VALUE_TARGETS):
            if key in batch:  # e.g. APPO's GAE advantages (vtrace=False)
                data[key] = self.tensor(np.asarray(batch[key], np.float32))
        return data

    @torch.no_grad()
    def _bootstrap_values(self, batch: dict[str, np.ndarray], needs_bootstrap: np.ndarray,
                          layout: SequenceLayout | None = None) -> torch.Tensor:
        """[T, B]: V(next obs) where the trajectory was cut (`needs_bootstrap`), 0 elsewhere."""
        out = np.zeros(needs_bootstrap.shape, np.float32)
        rows, cols = np.nonzero(needs_bootstrap)
        if rows.size and layout is not None:
            # Every cut ends a sequence: its next observation's value continues that sequence's state.
            _, next_values = sequence_values(self.rl_module, batch, layout.seqs, layout.numpy_state_in())
            out[rows, cols] = next_values[rows, cols]
        elif rows.size:
            next_obs = np.ascontiguousarray(batch[Columns.NEXT_OBS][rows, cols], np.float32)
            compute_values = value_function(self.rl_module, "The IMPALA/APPO bootstrap value")
            out[rows, cols] = compute_values({Columns.OBS: self.tensor(next_obs)}).float().cpu().numpy()
        return self.tensor(out)

    def after_update(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Work after the gradient steps of an update, given its metrics (APPO: target network, KL
        coefficient); returns extra metrics. IMPALA has none."""
        return {}

    # ------------------------------------------------------------ loss

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """IMPALA's loss on one time-major minibatch (see the class docstring)."""
        T, B = batch[Columns.REWARDS].shape
        dist = self.dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(flat(batch[Columns.ACTIONS])).reshape(T, B)
        values = self.module_values(batch, fwd_out).reshape(T, B)
        vs, pg_advantages = self.vtrace_targets(config, batch, values, logp)
        mask = batch[Columns.LOSS_MASK]
        count = mask.sum().clamp(min=1.0)
        policy_loss = -(logp * pg_advantages * mask).sum() / count
        vf_loss = 0.5 * ((values - vs).pow(2) * mask).sum() / count
        entropy = (dist.entropy().reshape(T, B) * mask).sum() / count
        self._loss_stats = {POLICY_LOSS_KEY: policy_loss.detach(), VF_LOSS_KEY: vf_loss.detach(),
                            ENTROPY_KEY: entropy.detach()}
        return policy_loss + config.vf_loss_coeff * vf_loss - self._curr_entropy_coeff * entropy

    def vtrace_targets(self, config: ResolvedConfig, batch: dict[str, Any], values: torch.Tensor,
                       target_logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(vs, pg_advantages), [T, B], of V-trace for the policy with log-probabilities
        `target_logp`, given the module's `values` of the minibatch's observations."""
        values = values.detach()
        shifted = torch.zeros_like(values)
        shifted[:-1] = values[1:]
        next_values = torch.where(batch[NEEDS_BOOTSTRAP], batch[Columns.VALUES_BOOTSTRAPPED], shifted)
        return vtrace(batch[Columns.ACTION_LOGP], target_logp.detach(), batch[Columns.REWARDS], values, next_values,
                      batch[Columns.TERMINATEDS], batch[DONES], config.gamma, config.vtrace_clip_rho_threshold,
                      config.vtrace_clip_pg_rho_threshold)

    def module_values(self, batch: dict[str, Any], fwd_out: dict[str, Any]) -> torch.Tensor:
        """V of the minibatch's observations (flat [T * B]), with gradient: forward_train's
        `vf_preds`, or the module's compute_values."""
        values = fwd_out.get(Columns.VF_PREDS)
        if values is not None:
            return values
        compute_values = getattr(self.rl_module, "compute_values", None)
        if compute_values is None:
            raise TypeError(
                f"{type(self).__name__} needs the value of each observation: {type(self.rl_module).__name__}'s "
                "forward_train returns no 'vf_preds' and it has no compute_values(batch) method. Implement "
                "compute_values (rlx.core.rl_module.apis.ValueFunctionAPI).")
        return compute_values({Columns.OBS: flat(batch[Columns.OBS])})

    # ------------------------------------------------------------ state

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        state["rng"] = self._rng.bit_generator.state
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        if "rng" in state:
            self._rng.bit_generator.state = state["rng"]


def flat(column: torch.Tensor) -> torch.Tensor:
    """A time-major [T, B, ...] column as [T * B, ...] (row t * B + b)."""
    return column.reshape((-1,) + tuple(column.shape[2:]))


def flat_columns(minibatch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The per-step columns of a time-major minibatch, flattened for the module's forward pass."""
    return {k: flat(minibatch[k]) for k in (Columns.OBS, Columns.ACTIONS, Columns.ACTION_LOGP, Columns.REWARDS)}
