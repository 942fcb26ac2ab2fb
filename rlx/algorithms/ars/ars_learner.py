"""ARS's Learner: the augmented-random-search step on the flat parameters."""
from __future__ import annotations

import numpy as np

from rlx.algorithms.es.es_learner import ESLearner
from rlx.algorithms.es.perturbations import policy_parameters
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import build_optimizer


def ars_gradient(noisy_returns: np.ndarray, noise: np.ndarray, *, rollouts_used: int) -> np.ndarray:
    """ARS's ascent direction (Mania et al., 2018, V1-t/V2-t): keep the `rollouts_used` directions
    whose better return max(r+, r-) is highest, then

        g = sum_kept (r+ - r-) * eps / (rollouts_used * std(kept returns))

    `noisy_returns` is [N, 2] (returns of theta + sigma*eps and theta - sigma*eps), `noise` [N, dim].
    The std normalisation is skipped when the kept returns are all equal.
    """
    best = noisy_returns.max(axis=1)
    kept = np.argsort(-best, kind="stable")[:min(int(rollouts_used), len(best))]
    returns, eps = noisy_returns[kept], noise[kept]
    g = ((returns[:, 0] - returns[:, 1]) @ eps).astype(np.float32) / len(kept)
    std = float(np.std(returns))
    if not np.isclose(std, 0.0):
        g /= std
    return g


class ARSLearner(ESLearner):
    """Augmented random search: the ES learner's flow with ARS's direction (`ars_gradient`) and a
    plain SGD step theta <- theta + sgd_stepsize * g (no L2 penalty)."""

    def configure_optimizers_for_module(self, module_id: str, config: ResolvedConfig | None = None) -> None:
        """Plain SGD over the policy's parameters with lr=sgd_stepsize."""
        config = self.config if config is None else config
        params = policy_parameters(self.rl_module)
        self.register_optimizer(module_id=module_id, optimizer=build_optimizer(params, config.sgd_stepsize,
                                                                               {"type": "sgd"}),
                                params=params, lr_or_lr_schedule=config.sgd_stepsize)

    def gradient(self, noisy_returns: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """ARS's direction from the best `rollouts_used` perturbations."""
        return ars_gradient(noisy_returns, noise, rollouts_used=self.config.rollouts_used)

    def l2_coeff(self) -> float:
        """ARS has no L2 penalty."""
        return 0.0
