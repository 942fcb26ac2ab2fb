"""ES's Learner: the evolution-strategies gradient estimate and an Adam step on the flat parameters."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from rlx.algorithms.es.perturbations import (
    centered_ranks, get_flat, noise_seed, noise_slices, policy_parameters, shared_noise_table,
)
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import build_optimizer
from rlx.core.learner.torch.torch_learner import TorchLearner


def es_gradient(noisy_returns: np.ndarray, noise: np.ndarray, *, return_proc_mode: str = "centered_rank") -> np.ndarray:
    """ES's estimate of d E[return] / d theta from antithetic pairs (Salimans et al., 2017):

        r_i = centered_rank(noisy_returns)[i]               (all 2N returns ranked together)
        g   = sum_i (r_i+ - r_i-) * eps_i / (2N)

    `noisy_returns` is [N, 2] (the returns of theta + sigma*eps_i and theta - sigma*eps_i),
    `noise` is [N, dim] (the eps_i). The 1/sigma factor is left to the step size, as in RLlib.
    """
    if return_proc_mode != "centered_rank":
        raise ValueError(f"return_proc_mode {return_proc_mode!r}; ES ranks returns ('centered_rank').")
    ranked = centered_ranks(noisy_returns)
    weights = ranked[:, 0] - ranked[:, 1]
    return (weights @ noise).astype(np.float32) / noisy_returns.size


class ESLearner(TorchLearner):
    """Evolution strategies' update, no backpropagation: estimate the gradient of the return
    from the evaluated perturbations (`es_gradient`) and take one Adam step (lr = `stepsize`)
    on the flat parameter vector theta, minimising -g + l2_coeff * theta.

    `update_from_batch` takes {"noise_indices": [N], "returns": [N, 2]}: the perturbations'
    offsets into the shared noise table and their two returns.
    """

    # Episodes are evaluated whole on the runners, which carry a recurrent module's state: nothing
    # here unrolls through time, so LSTM policies need nothing more.
    supports_recurrent_modules = True
    # torch_compile_learner_what_to_compile='complete_update' is refused at build (rlx.core.learner.compile).
    compile_complete_update = False
    compile_complete_update_reason = ("ES and ARS step from the returns of evaluated perturbations, with no forward "
                                      "or backward pass to compile")

    def __init__(self, config: ResolvedConfig, module: Any):
        super().__init__(config, module)
        self.noise = shared_noise_table(noise_seed(config), config.noise_size)

    def configure_optimizers_for_module(self, module_id: str, config: ResolvedConfig | None = None) -> None:
        """Adam over the policy's parameters (elementwise, so the same as Adam on theta) with lr=stepsize
        (`config.optimizer` can change Adam's other arguments, or the optimizer)."""
        config = self.config if config is None else config
        params = policy_parameters(self.rl_module)
        optimizer = build_optimizer(params, config.stepsize, dict(config.optimizer or {}) or {"type": "adam"})
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params,
                                lr_or_lr_schedule=config.stepsize)

    @property
    def flat_params(self) -> Sequence[torch.Tensor]:
        """The perturbed parameters, in the flat vector's order."""
        return self._optimizer_params["default"]

    def get_flat_weights(self) -> np.ndarray:
        """theta, the policy's parameters as one vector."""
        return get_flat(self.flat_params)

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, Any]:
        """One ES step from the perturbations in `batch`; returns the update's metrics."""
        self.begin_update(batch, timestep)
        theta = self.get_flat_weights()
        noise = noise_slices(self.noise, batch["noise_indices"], theta.size)
        g = self.gradient(np.asarray(batch["returns"], np.float32), noise)
        loss_grad = -g + self.l2_coeff() * theta
        self.apply_flat_gradient(loss_grad)
        new_theta = self.get_flat_weights()
        metrics = {
            "gradient_norm": float(np.linalg.norm(g)),
            "weights_norm": float(np.linalg.norm(new_theta)),
            "update_ratio": float(np.linalg.norm(new_theta - theta) / max(float(np.linalg.norm(theta)), 1e-12)),
            "curr_lr": self._get_optimizer_lr(self.optimizer),
        }
        metrics.update(self.end_update())
        return metrics

    def gradient(self, noisy_returns: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """The ascent direction estimated from the perturbations (ES: `es_gradient`)."""
        return es_gradient(noisy_returns, noise, return_proc_mode=self.config.return_proc_mode)

    def l2_coeff(self) -> float:
        """Weight of the L2 penalty on theta (ES: config.l2_coeff)."""
        return float(self.config.l2_coeff)

    def apply_flat_gradient(self, flat_grad: np.ndarray) -> None:
        """Step the optimizer with `flat_grad` (the gradient of a loss to minimise) as .grad."""
        params = self.flat_params
        grad = torch.as_tensor(flat_grad, dtype=params[0].dtype)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = grad[offset:offset + n].view_as(p).clone()
            offset += n
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.num_grad_updates += 1
