"""PPO's Learner: GAE, then `num_epochs` of minibatch SGD on the clipped surrogate loss."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from rlx.core.learner.torch.torch_learner import TorchLearner
# The advantage estimation the PPO family's Learners share (A2C, PG, APPO, IMPALA import it from here too).
from rlx.utils.postprocessing import (  # noqa: F401
    bootstrap_mask, episode_dones, estimate_advantages, next_state_values, state_values)
from rlx.utils.schedules import PiecewiseSchedule


class PPOLearner(TorchLearner):
    """Clipped-surrogate PPO with an optional adaptive KL penalty and clipped value loss.

    Loss per sample (RLlib's formulation):
        -min(A * r, A * clip(r, 1 - clip_param, 1 + clip_param))
        + vf_loss_coeff * min((V - V_target)^2, vf_clip_param)   (no clip when vf_clip_param is None)
        - entropy_coeff * H[pi]
        + kl_coeff * KL(pi_old || pi)

    The loss of every minibatch is `compute_loss_for_module(module_id=, config=, batch=,
    fwd_out=)` (through `compute_losses` when a subclass overrides that), so a subclass can
    add terms to it; the minibatch holds `obs`, `actions`, `action_logp`,
    `action_dist_inputs` (of the sampling policy), `advantages` and `value_targets`, and
    `fwd_out` is the module's `forward_train` output. The optimizers come from
    `configure_optimizers_for_module`: with several (e.g. one for the policy, one for the
    value function), each steps its own parameters with the gradient of the total loss.
    """

    #: PPO trains recurrent (stateful) modules, on sequences (rlx.algorithms.ppo.recurrent).
    supports_recurrent_modules = True
    #: Advantages are estimated along each trajectory of the time-major batch.
    trains_on_time_major_batches = True

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.kl_coeff = float(config.kl_coeff)
        self.entropy_schedule = PiecewiseSchedule(config.entropy_coeff)
        self.dist_cls = self.rl_module.get_train_action_dist_cls()
        self._rng = np.random.default_rng(None if config.seed is None else int(config.seed) + 7)
        # The entropy coefficient of the update in progress, and the loss terms (detached) of the
        # last compute_loss_for_module call, which the update averages into its metrics.
        self._curr_entropy_coeff = 0.0
        self._loss_stats: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------ advantages

    def compute_advantages(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(advantages, value_targets, vf_preds), each [T, B], for a time-major batch."""
        cfg = self.config
        return compute_advantages(self.rl_module, batch, gamma=cfg.gamma, lambda_=cfg.lambda_,
                                  use_critic=cfg.use_critic, use_gae=cfg.use_gae)

    # ------------------------------------------------------------ update

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, float]:
        if self.rl_module.is_stateful():
            from rlx.algorithms.ppo.recurrent import recurrent_update

            return recurrent_update(self, batch, timestep)
        cfg = self.config
        self.begin_update(batch, timestep)
        adv, targets, vf_preds = self.compute_advantages(batch)
        valid = batch.get(Columns.VALID)
        select = (lambda a: a[valid]) if valid is not None else (lambda a: a.reshape((-1,) + a.shape[2:]))
        adv = select(adv)
        if adv.size > 1:
            adv = (adv - adv.mean()) / max(float(adv.std()), 1e-4)
        obs = select(batch[Columns.OBS])
        n = obs.shape[0]
        # Float columns travel in one matrix so a minibatch is one gather, not one per column.
        floats = np.concatenate([
            obs.reshape(n, -1),
            select(batch[Columns.ACTION_DIST_INPUTS]).reshape(n, -1),
            select(batch[Columns.ACTION_LOGP]).reshape(n, 1),
            adv.reshape(n, 1),
            select(targets).reshape(n, 1),
        ], axis=1).astype(np.float32, copy=False)
        obs_dim = int(np.prod(obs.shape[1:]))
        dist_dim = floats.shape[1] - obs_dim - 3
        floats_t = self.tensor(floats)
        actions_t = self.tensor(np.ascontiguousarray(select(batch[Columns.ACTIONS])))
        obs_shape = obs.shape[1:]
        lr = self.set_lr_for_timestep(timestep)
        entropy_coeff = self.entropy_schedule.value(timestep)
        self._curr_entropy_coeff = entropy_coeff
        module = self.rl_module
        module_id = self.module_id
        # Subclasses may override compute_losses (then called with {module_id: ...} dicts) or
        # register several optimizers (then each steps its parameters); the default is one loss
        # and one optimizer, the fast path.
        custom_losses = self._overrides("compute_losses")
        one_optimizer = self.uses_one_optimizer()
        mb = min(cfg.minibatch_size, n)
        stats_rows: list[torch.Tensor] = []
        stat_names: list[str] = []
        grad_norms = 0.0
        order = np.arange(n)
        for _ in range(cfg.num_epochs):
            if cfg.shuffle_batch_per_epoch:
                order = self._rng.permutation(n)
            for start in range(0, n, mb):
                idx = order[start : start + mb]
                if idx.size < mb // 2 and start > 0:
                    continue  # a short tail adds noise without adding data: skip it
                idx_t = self.tensor(idx)
                rows = floats_t.index_select(0, idx_t)
                minibatch = {
                    Columns.OBS: rows[:, :obs_dim].reshape((-1,) + obs_shape),
                    Columns.ACTION_DIST_INPUTS: rows[:, obs_dim : obs_dim + dist_dim],
                    Columns.ACTION_LOGP: rows[:, obs_dim + dist_dim],
                    Columns.ADVANTAGES: rows[:, obs_dim + dist_dim + 1],
                    Columns.VALUE_TARGETS: rows[:, obs_dim + dist_dim + 2],
                    Columns.ACTIONS: actions_t.index_select(0, idx_t),
                }
                self._loss_stats = None
                fwd_out = module.forward_train(minibatch)
                if custom_losses:
                    losses = self.compute_losses(fwd_out={module_id: fwd_out}, batch={module_id: minibatch})
                    loss = losses[module_id] if module_id in losses else sum(losses.values())
                else:
                    loss = self.compute_loss_for_module(module_id=module_id, config=cfg, batch=minibatch,
                                                        fwd_out=fwd_out)
                grad_norms += self.step_minibatch(loss, one_optimizer, stats_rows, stat_names)
        return self.update_metrics(stats_rows, stat_names, grad_norms, lr, select(targets), select(vf_preds))

    def uses_one_optimizer(self) -> bool:
        """Whether the update steps one optimizer over all parameters (the default, fast path)."""
        return len(self.optimizers) == 1 and next(iter(self._optimizer_params.values())) is self.params

    def step_minibatch(self, loss: torch.Tensor, one_optimizer: bool, stats_rows: list[torch.Tensor],
                       stat_names: list[str]) -> float:
        """Step the optimizer(s) on one minibatch's loss; appends the loss terms (in the order of
        `stat_names`, filled on the first call) to `stats_rows`. Returns the gradient norm."""
        stats = self._loss_stats if self._loss_stats is not None else {}
        stats["total_loss"] = loss.detach()
        norm = self.apply_loss(loss, terms=stats) if one_optimizer else \
            self.apply_loss_to_all_optimizers(loss, terms=stats)
        if not stat_names:
            stat_names.extend(stats)
        stats_rows.append(torch.stack([stats[k] for k in stat_names]))
        return norm

    def update_metrics(self, stats_rows: list[torch.Tensor], stat_names: list[str], grad_norms: float, lr: float,
                       targets: np.ndarray, vf_preds: np.ndarray) -> dict[str, float]:
        """The update's metrics: mean loss terms over the minibatches, gradient norm, learning rate,
        entropy and KL coefficients, and how much of the value targets' variance vf_preds explain."""
        cfg = self.config
        count = len(stats_rows)
        metrics = dict(zip(stat_names, torch.stack(stats_rows).mean(0).tolist()))
        metrics["gradients_global_norm"] = grad_norms / max(count, 1)
        metrics["curr_lr"] = lr
        metrics["curr_entropy_coeff"] = self._curr_entropy_coeff
        metrics["num_minibatch_updates"] = count
        metrics.update(self.end_update())
        if cfg.use_critic:
            var = float(np.var(targets))
            metrics["vf_explained_var"] = float(1.0 - np.var(targets - vf_preds) / var) if var > 0 else 0.0
        if cfg.use_kl_loss:
            metrics["curr_kl_coeff"] = self.kl_coeff
            self._update_kl_coeff(metrics.get("mean_kl_loss", 0.0))
        return metrics

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """PPO's total loss on one minibatch (see the class docstring); its terms are kept for the
        update's metrics (policy_loss, vf_loss, vf_loss_unclipped, entropy, mean_kl_loss)."""
        cfg = config
        dist = self.dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(batch[Columns.ACTIONS])
        ratio = torch.exp(logp - batch[Columns.ACTION_LOGP])
        adv = batch[Columns.ADVANTAGES]
        surrogate = torch.min(adv * ratio, adv * ratio.clamp(1.0 - cfg.clip_param, 1.0 + cfg.clip_param))
        policy_loss = -surrogate.mean()
        total = policy_loss
        entropy_coeff = self._curr_entropy_coeff
        if entropy_coeff:
            entropy = dist.entropy().mean()
            total = total - entropy_coeff * entropy
        else:
            with torch.no_grad():  # reported only: no gradient needed
                entropy = dist.entropy().mean()
        stats = {POLICY_LOSS_KEY: policy_loss.detach(), ENTROPY_KEY: entropy.detach()}
        if cfg.use_critic:
            vf_preds = fwd_out.get(Columns.VF_PREDS)
            if vf_preds is None:  # RLlib's new-API modules: the value function is a separate call
                vf_preds = self._module_values(batch, fwd_out.get(Columns.EMBEDDINGS))
            vf_err = (vf_preds - batch[Columns.VALUE_TARGETS]).pow(2)
            vf_loss = (vf_err if cfg.vf_clip_param is None else vf_err.clamp(0.0, cfg.vf_clip_param)).mean()
            total = total + cfg.vf_loss_coeff * vf_loss
            stats[VF_LOSS_KEY] = vf_loss.detach()
            stats["vf_loss_unclipped"] = vf_err.detach().mean()
        if cfg.use_kl_loss:
            prev = self.dist_cls.from_logits(batch[Columns.ACTION_DIST_INPUTS])
            kl = prev.kl(dist).mean()
            total = total + self.kl_coeff * kl
            stats["mean_kl_loss"] = kl.detach()
        self._loss_stats = stats
        return total

    def _module_values(self, batch: dict[str, torch.Tensor], embeddings: Any = None) -> torch.Tensor:
        compute_values = getattr(self.rl_module, "compute_values", None)
        if compute_values is None:
            raise TypeError(
                f"PPO with use_critic=True needs the value of each observation: {type(self.rl_module).__name__}'s "
                "forward_train returns no 'vf_preds' and it has no compute_values(batch) method. Implement "
                "compute_values (rlx.core.rl_module.apis.ValueFunctionAPI), or set training(use_critic=False).")
        if embeddings is not None and _takes_embeddings(compute_values):
            # forward_train's embeddings spare compute_values the encoder pass (RLlib's ValueFunctionAPI).
            return compute_values(batch, embeddings=embeddings)
        return compute_values(batch)

    def _update_kl_coeff(self, mean_kl: float) -> None:
        target = self.config.kl_target
        if mean_kl > 2.0 * target:
            self.kl_coeff *= 1.5
        elif mean_kl < 0.5 * target:
            self.kl_coeff *= 0.5

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        state["kl_coeff"] = self.kl_coeff
        state["rng"] = self._rng.bit_generator.state
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))
        if "rng" in state:
            self._rng.bit_generator.state = state["rng"]


def _with_postprocessed(batch: dict[str, np.ndarray], adv: np.ndarray,
                        targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and value targets, taking those an on_postprocess_trajectory callback wrote into
    the batch (rlx.evaluation.postprocessing) wherever it did (finite entries)."""
    for key, own in ((Columns.ADVANTAGES, "adv"), (Columns.VALUE_TARGETS, "targets")):
        given = batch.get(key)
        if given is None:
            continue
        given = np.asarray(given, np.float32).reshape(adv.shape)
        keep = np.isfinite(given)
        if own == "adv":
            adv = np.where(keep, given, adv)
        else:
            targets = np.where(keep, given, targets)
    return adv, targets


def compute_advantages(module: Any, batch: dict[str, np.ndarray], *, gamma: float, lambda_: float = 1.0,
                       use_critic: bool = True, use_gae: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(advantages, value_targets, vf_preds), each [T, B], of a time-major batch (rlx.utils.
    postprocessing.estimate_advantages), with the advantages and value targets an
    on_postprocess_trajectory callback wrote into the batch taking precedence where it wrote them.
    Shared by PPO, A2C, PG and APPO."""
    adv, targets, values = estimate_advantages(module, batch, gamma=gamma, lambda_=lambda_, use_critic=use_critic,
                                               use_gae=use_gae)
    if not use_critic:
        return adv, targets, values
    return _with_postprocessed(batch, adv, targets) + (values,)


def _takes_embeddings(fn: Any) -> bool:
    """Whether compute_values accepts `embeddings=` (ValueFunctionAPI's signature, or **kwargs)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "embeddings" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
