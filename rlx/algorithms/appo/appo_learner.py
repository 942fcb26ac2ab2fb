"""APPO's Learner: IMPALA's V-trace learner with IMPACT's clipped surrogate and target network."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.algorithms.impala.impala_learner import IMPALALearner, flat
from rlx.algorithms.ppo.ppo_learner import compute_advantages
from rlx.algorithms.ppo.recurrent import recurrent_advantages
from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from rlx.core.learner.target_networks import make_target_network, update_target_network
from rlx.core.learner.sequences import SequenceLayout
from rlx.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS, TargetNetworkAPI


class APPOLearner(IMPALALearner):
    """Asynchronous PPO in IMPACT's form (Luo et al., 2020), mean over valid steps:

        pi_old        = the target network's policy (a lagging copy of the module)
        is_ratio      = clip(mu(a|x) / pi_old(a|x), 0, target_worker_clipping)
        ratio         = is_ratio * pi(a|x) / mu(a|x)
        A, v          = V-trace advantages and value targets for pi_old (vtrace=True), or PPO's
                        GAE advantages and value targets (vtrace=False)
        policy_loss   = -min(A * ratio, A * clip(ratio, 1 - clip_param, 1 + clip_param))
        total         = policy_loss + vf_loss_coeff * 0.5 * (V - v)^2 - entropy_coeff * H[pi]
                        + kl_coeff * KL(pi_old || pi)                       (with use_kl_loss)

    The target network moves towards the module (by `tau`) every `target_network_update_freq`
    units of `circular_buffer_num_batches * circular_buffer_iterations_per_batch` updates (one
    unit per update with use_circular_buffer=False); the KL coefficient adapts after every update
    towards `kl_target`. A module implementing TargetNetworkAPI keeps its own target networks
    (`make_target_networks`, `get_target_network_pairs` -> [(online, target), ...] as in RLlib,
    `forward_target` returning 'target_network_action_dist_inputs'); otherwise the learner keeps a
    frozen copy of the whole module. With a recurrent module the target network runs over the
    same sequences as the module, from the same stored states (`forward_minibatch`).
    """

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.kl_coeff = float(config.kl_coeff)
        module = self.rl_module
        if isinstance(module, TargetNetworkAPI):
            module.make_target_networks()
            self.target = None
        else:
            self.target = make_target_network(module)
        self._updates_since_target_update = 0
        self.num_target_updates = 0

    def target_network_pairs(self) -> list[tuple[Any, Any]]:
        """[(online, target), ...] (RLlib's order): the module's own pairs, or (module, frozen copy)."""
        module = self.rl_module
        if isinstance(module, TargetNetworkAPI):  # (then self.target is None)
            return list(module.get_target_network_pairs())
        return [(module, self.target)]

    @torch.no_grad()
    def target_action_dist_inputs(self, batch: dict[str, Any], layout: SequenceLayout | None = None) -> torch.Tensor:
        """The target (old) policy's action-distribution inputs for a time-major minibatch, as flat
        [T * B] rows: for the flat observations, or (recurrent modules) run over `layout`'s sequences."""
        if layout is None and self.rl_module.is_stateful():
            raise ValueError("APPO's target policy of a recurrent module runs over sequences: pass the minibatch's "
                             "SequenceLayout (forward_minibatch puts the result into fwd_out).")
        inputs = {Columns.OBS: flat(batch[Columns.OBS])} if layout is None else layout.inputs(batch[Columns.OBS])
        module = self.rl_module
        if isinstance(module, TargetNetworkAPI):  # (then self.target is None)
            out = module.forward_target(inputs)[TARGET_NETWORK_ACTION_DIST_INPUTS]
        else:
            assert self.target is not None  # __init__ copies the modules without TargetNetworkAPI
            out = self.target.forward_train(inputs)[Columns.ACTION_DIST_INPUTS]
        return out if layout is None else layout.to_time_major(out, batch[Columns.REWARDS].shape[0])

    def forward_minibatch(self, minibatch: dict[str, torch.Tensor],
                          layout: SequenceLayout | None = None) -> dict[str, Any]:
        """IMPALA's forward pass plus the target policy's action-distribution inputs
        ('target_network_action_dist_inputs'), from the same sequences for a recurrent module."""
        fwd_out = dict(super().forward_minibatch(minibatch, layout))
        if TARGET_NETWORK_ACTION_DIST_INPUTS not in fwd_out:
            fwd_out[TARGET_NETWORK_ACTION_DIST_INPUTS] = self.target_action_dist_inputs(minibatch, layout)
        return fwd_out

    # ------------------------------------------------------------ update

    def loss_inputs(self, batch: dict[str, np.ndarray],
                    layout: SequenceLayout | None = None) -> dict[str, torch.Tensor]:
        """IMPALA's inputs, plus GAE advantages and value targets when vtrace=False (a recurrent
        module's values from its run over `layout`'s sequences)."""
        cfg = self.config
        if layout is None:
            layout = self.sequence_layout(batch)
        if not cfg.vtrace:
            if layout is None:
                advantages, targets, _ = compute_advantages(self.rl_module, batch, gamma=cfg.gamma,
                                                            lambda_=cfg.lambda_, use_gae=cfg.use_gae)
            else:
                advantages, targets, _ = recurrent_advantages(self, batch, layout.seqs, layout.numpy_state_in())
            batch = {**batch, Columns.ADVANTAGES: advantages, Columns.VALUE_TARGETS: targets}
        return super().loss_inputs(batch, layout)

    def after_update(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Move the target network when due, and adapt the KL coefficient."""
        cfg = self.config
        out: dict[str, Any] = {}
        self._updates_since_target_update += 1
        every = cfg.target_network_update_freq
        if cfg.use_circular_buffer:
            every *= cfg.circular_buffer_num_batches * cfg.circular_buffer_iterations_per_batch
        if self._updates_since_target_update >= every:
            for online, target in self.target_network_pairs():
                update_target_network(target, online, cfg.tau)
            self._updates_since_target_update = 0
            self.num_target_updates += 1
        out["num_target_updates"] = self.num_target_updates
        if cfg.use_kl_loss:
            out["curr_kl_coeff"] = self.kl_coeff
            kl = float(metrics["mean_kl_loss"])
            if kl > 2.0 * cfg.kl_target:
                self.kl_coeff *= 1.5
            elif kl < 0.5 * cfg.kl_target:
                self.kl_coeff *= 0.5
        return out

    # ------------------------------------------------------------ loss

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """APPO's loss on one time-major minibatch (see the class docstring)."""
        T, B = batch[Columns.REWARDS].shape
        actions = flat(batch[Columns.ACTIONS])
        dist = self.dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        target_inputs = fwd_out.get(TARGET_NETWORK_ACTION_DIST_INPUTS)
        if target_inputs is None:
            target_inputs = self.target_action_dist_inputs(batch)
        old_dist = self.dist_cls.from_logits(target_inputs.detach())
        logp = dist.logp(actions).reshape(T, B)
        old_logp = old_dist.logp(actions).reshape(T, B)
        behaviour_logp = batch[Columns.ACTION_LOGP]
        values = self.module_values(batch, fwd_out).reshape(T, B)
        if config.vtrace:
            value_targets, advantages = self.vtrace_targets(config, batch, values, old_logp)
        else:
            value_targets, advantages = batch[Columns.VALUE_TARGETS], batch[Columns.ADVANTAGES]
        is_ratio = torch.exp(behaviour_logp - old_logp).clamp(0.0, config.target_worker_clipping)
        ratio = is_ratio * torch.exp(logp - behaviour_logp)
        clipped = ratio.clamp(1.0 - config.clip_param, 1.0 + config.clip_param)
        surrogate = torch.min(advantages * ratio, advantages * clipped)
        mask = batch[Columns.LOSS_MASK]
        count = mask.sum().clamp(min=1.0)
        policy_loss = -(surrogate * mask).sum() / count
        vf_loss = 0.5 * ((values - value_targets).pow(2) * mask).sum() / count
        entropy = (dist.entropy().reshape(T, B) * mask).sum() / count
        total = policy_loss + config.vf_loss_coeff * vf_loss - self._curr_entropy_coeff * entropy
        mean_is = (is_ratio * mask).sum() / count
        stats = {POLICY_LOSS_KEY: policy_loss.detach(), VF_LOSS_KEY: vf_loss.detach(), ENTROPY_KEY: entropy.detach(),
                 "mean_IS": mean_is, "var_IS": ((is_ratio - mean_is).pow(2) * mask).sum() / count}
        if config.use_kl_loss:
            kl = (old_dist.kl(dist).reshape(T, B) * mask).sum() / count
            total = total + self.kl_coeff * kl
            stats["mean_kl_loss"] = kl.detach()
        self._loss_stats = stats
        return total

    # ------------------------------------------------------------ state

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        state.update(kl_coeff=self.kl_coeff, updates_since_target_update=self._updates_since_target_update,
                     num_target_updates=self.num_target_updates)
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))
        self._updates_since_target_update = int(state.get("updates_since_target_update", 0))
        self.num_target_updates = int(state.get("num_target_updates", 0))

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """The target networks' weights (a module's own target networks are in its weights)."""
        if self.target is None:
            return {}
        return {f"target.{k}": v for k, v in self.target.state_dict().items()}

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Load the target network's weights."""
        if self.target is None:
            super().set_extra_tensors(tensors)
            return
        state = {k[len("target."):]: torch.as_tensor(v) for k, v in tensors.items() if k.startswith("target.")}
        self.target.load_state_dict(state)
