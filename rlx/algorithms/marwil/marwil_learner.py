"""MARWIL's Learner: value targets, then one gradient step of advantage-weighted imitation."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import POLICY_LOSS_KEY, VF_LOSS_KEY
from rlx.core.learner.torch.torch_learner import TorchLearner
from rlx.core.rl_module.apis import value_function
from rlx.utils.errors import ConfigError
from rlx.utils.postprocessing import estimate_advantages

#: Learner result names (RLlib's).
MOVING_AVG_SQD_ADV_NORM_KEY = "moving_avg_sqd_adv_norm"
VF_EXPLAINED_VAR_KEY = "vf_explained_var"
#: RLlib's names of these keys (`ray.rllib.algorithms.marwil.marwil_learner`); the explained
#: variance is reported as "vf_explained_var", as PPO reports it.
LEARNER_RESULTS_MOVING_AVG_SQD_ADV_NORM_KEY = MOVING_AVG_SQD_ADV_NORM_KEY
LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY = VF_EXPLAINED_VAR_KEY


class MARWILLearner(TorchLearner):
    """MARWIL's loss (RLlib's formulation) on each train batch, in one gradient step:

        A = V_target - V(s)                       (V_target: GAE(lambda_) targets, by default
                                                   discounted returns bootstrapped at cuts)
        c^2 <- c^2 + rate * (mean(A^2) - c^2)     (moving_average_sqd_adv_norm_*)
        policy_loss = -mean(exp(beta * A / c) * (log pi(a|s) + bc_logstd_coeff * mean(log std)))
        total_loss = policy_loss + vf_coeff * 0.5 * mean(A^2)

    With beta == 0 (behavior cloning) the weights are 1 and there is no value loss. The loss
    goes through `compute_loss_for_module(module_id=, config=, batch=, fwd_out=)`, so a subclass
    can add terms; the batch holds `obs`, `actions` and (beta > 0) `value_targets`.
    """

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.dist_cls = self.rl_module.get_train_action_dist_cls()
        #: c^2, the moving average of the squared advantages.
        self.moving_avg_sqd_adv_norm = float(config.moving_average_sqd_adv_norm_start)
        self._loss_stats: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------ value targets

    def compute_value_targets(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """The [T, B] value targets of a time-major batch: GAE(lambda_) returns with the current
        value function, bootstrapped from V(new_obs) where an episode is cut without terminating."""
        cfg = self.config
        _, targets, _ = estimate_advantages(self.rl_module, batch, gamma=cfg.gamma, lambda_=cfg.lambda_)
        return targets

    # ------------------------------------------------------------ update

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, float]:
        cfg = self.config
        self.begin_update(batch, timestep)
        valid = batch.get(Columns.VALID)
        select = (lambda a: a[valid]) if valid is not None else (lambda a: a.reshape((-1,) + a.shape[2:]))
        train = {
            Columns.OBS: self.tensor(np.ascontiguousarray(select(batch[Columns.OBS]))),
            Columns.ACTIONS: self.tensor(np.ascontiguousarray(select(batch[Columns.ACTIONS]))),
        }
        targets = None
        if cfg.beta != 0.0:
            targets = select(self.compute_value_targets(batch)).astype(np.float32)
            train[Columns.VALUE_TARGETS] = self.tensor(targets)
        lr = self.set_lr_for_timestep(timestep)
        self._loss_stats = {}
        fwd_out = self.rl_module.forward_train(train)
        if self._overrides("compute_losses"):
            losses = self.compute_losses(fwd_out={self.module_id: fwd_out}, batch={self.module_id: train})
            loss = losses[self.module_id] if self.module_id in losses else sum(losses.values())
        else:
            loss = self.compute_loss_for_module(module_id=self.module_id, config=cfg, batch=train, fwd_out=fwd_out)
        stats = dict(self._loss_stats)
        vf_preds = stats.pop("_vf_preds", None)
        stats["total_loss"] = loss.detach()
        norm = self.apply_loss(loss, terms=stats)
        metrics = {k: float(v) for k, v in stats.items()}
        metrics["gradients_global_norm"] = norm
        metrics["curr_lr"] = lr
        if targets is not None:
            metrics[MOVING_AVG_SQD_ADV_NORM_KEY] = self.moving_avg_sqd_adv_norm
            if vf_preds is not None:
                var = float(np.var(targets))
                residual = float(np.var(targets - vf_preds.float().cpu().numpy()))
                metrics[VF_EXPLAINED_VAR_KEY] = 1.0 - residual / var if var > 0 else 0.0
        metrics.update(self.end_update())
        return metrics

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """MARWIL's total loss (see the class docstring); with beta == 0, behavior cloning's."""
        dist = self.dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(batch[Columns.ACTIONS])
        stats: dict[str, torch.Tensor] = {}
        if config.beta == 0.0:
            weights: Any = 1.0
            vf_loss: Any = 0.0
        else:
            values = fwd_out.get(Columns.VF_PREDS)
            if values is None:
                values = value_function(self.rl_module, "MARWIL's advantages")(batch)
            advantages = batch[Columns.VALUE_TARGETS] - values
            sqd_mean = advantages.pow(2).mean()
            vf_loss = 0.5 * sqd_mean
            rate = config.moving_average_sqd_adv_norm_update_rate
            self.moving_avg_sqd_adv_norm += rate * (float(sqd_mean.detach()) - self.moving_avg_sqd_adv_norm)
            scale = 1e-8 + self.moving_avg_sqd_adv_norm ** 0.5
            weights = torch.exp(config.beta * advantages.detach() / scale)
            stats[VF_LOSS_KEY] = vf_loss.detach()
            stats["_vf_preds"] = values.detach()
        log_std: Any = 0.0
        if config.bc_logstd_coeff > 0.0:
            if not hasattr(dist, "log_std"):
                raise ConfigError(f"bc_logstd_coeff={config.bc_logstd_coeff} needs a distribution with a log std "
                                  f"(Box actions); {type(dist).__name__} has none. Set bc_logstd_coeff=0.0.")
            log_std = dist.log_std.mean(dim=-1)
        policy_loss = -(weights * (logp + config.bc_logstd_coeff * log_std)).mean()
        stats[POLICY_LOSS_KEY] = policy_loss.detach()
        self._loss_stats = stats
        return policy_loss + config.vf_coeff * vf_loss

    # ------------------------------------------------------------ state

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        state[MOVING_AVG_SQD_ADV_NORM_KEY] = self.moving_avg_sqd_adv_norm
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.moving_avg_sqd_adv_norm = float(state.get(MOVING_AVG_SQD_ADV_NORM_KEY, self.moving_avg_sqd_adv_norm))
