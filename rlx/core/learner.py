"""Learner: owns a module's optimizer, learning-rate schedule and gradient clipping.

Algorithms subclass it and implement `update_from_batch(batch, timestep) -> metrics`
with their loss; the shared machinery (optimizer construction from `config.optimizer`,
lr schedules, `grad_clip` by value/norm/global_norm, state for checkpoints) lives here.
"""
from __future__ import annotations

import inspect
from typing import Any, Iterable

import numpy as np
import torch

from rlx.core.rl_module import RLModule
from rlx.utils.errors import ConfigError, did_you_mean
from rlx.utils.schedules import PiecewiseSchedule

_OWN_OPTIMIZERS = ("adam", "adamw", "sgd")


def build_optimizer(params: Iterable[torch.nn.Parameter], lr: float, options: dict[str, Any]) -> Any:
    """Create the optimizer named by `options['type']` (default Adam) with the other keys as kwargs.

    'adam', 'adamw' and 'sgd' use rlx's foreach implementations; any other name is looked
    up in torch.optim (e.g. 'RMSprop', 'Adagrad').
    """
    from rlx.core import optimizers

    options = dict(options or {})
    name = str(options.pop("type", "adam"))
    lowered = name.lower()
    if lowered in _OWN_OPTIMIZERS:
        cls: Any = optimizers.SGD if lowered == "sgd" else optimizers.Adam
        if lowered == "adamw":
            options.setdefault("weight_decay", 0.01)
            options["decoupled"] = True
    else:
        torch_names = {n.lower(): n for n in dir(torch.optim) if n[:1].isupper() and n != "Optimizer"}
        if lowered not in torch_names:
            choices = list(_OWN_OPTIMIZERS) + sorted(torch_names.values())
            raise ConfigError(
                f"optimizer type '{name}' is unknown.{did_you_mean(name, choices)} "
                f"Choose one of {', '.join(choices)}."
            )
        cls = getattr(torch.optim, torch_names[lowered])
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "params", "lr", "decoupled"}
    for key in options:
        if key not in accepted and key != "decoupled":
            raise ConfigError(
                f"optimizer option '{key}' is not an argument of the {name} optimizer."
                f"{did_you_mean(key, accepted)} Accepted: {', '.join(sorted(accepted))}."
            )
    optimizers.check_optimizer_options(name, options)
    if "betas" in options:
        options["betas"] = tuple(options["betas"])
    return cls(params, lr=lr, **options)


def clip_gradients(params: list[torch.nn.Parameter], grad_clip: float | None, clip_by: str) -> float:
    """Clip gradients in place; return the global L2 norm before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    total_t = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    total = float(total_t)
    if grad_clip is None:
        return total
    if clip_by == "global_norm":
        if total > grad_clip:
            torch._foreach_mul_(grads, grad_clip / (total + 1e-6))
        return total
    if clip_by == "value":
        for g in grads:
            g.clamp_(-grad_clip, grad_clip)
    elif clip_by == "norm":
        for g in grads:
            norm = torch.linalg.vector_norm(g)
            if norm > grad_clip:
                g.mul_(grad_clip / (norm + 1e-6))
    else:
        raise ConfigError(f"grad_clip_by must be 'value', 'norm' or 'global_norm', got {clip_by!r}.")
    return total


class Learner:
    """Updates one RLModule from training batches.

    A Learner owns one or more named optimizers (`optimizers`, most algorithms have just
    "default"), each with its own learning-rate schedule. Subclasses with several losses
    (SAC's actor, critic and alpha) override `configure_optimizers()`; tensors outside the
    module that must survive a checkpoint (target networks, SAC's log-alpha) go through
    `get_extra_tensors()`/`set_extra_tensors()`.

    Args:
        config: the Algorithm's (frozen) config.
        module: the module to train (shared with the local EnvRunner).
    """

    def __init__(self, config: Any, module: RLModule):
        self.config = config
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.lr_schedules: dict[str, PiecewiseSchedule] = {}
        self.optimizers: dict[str, Any] = {}
        self.num_grad_updates = 0
        self._last_target_update = 0
        self.configure_optimizers()

    def configure_optimizers(self) -> None:
        """Create the optimizers; the default is one optimizer ("default") over all module parameters."""
        self.add_optimizer("default", self.params, self.config.lr)

    def add_optimizer(self, name: str, params: list[torch.nn.Parameter], lr: Any) -> Any:
        """Register an optimizer named `name` over `params` with lr given as a float or a schedule."""
        schedule = PiecewiseSchedule(lr)
        self.lr_schedules[name] = schedule
        self.optimizers[name] = build_optimizer(params, schedule.value(0), self.config.optimizer)
        return self.optimizers[name]

    @property
    def optimizer(self) -> Any:
        """The first (for most algorithms the only) optimizer."""
        return next(iter(self.optimizers.values()))

    @property
    def lr_schedule(self) -> PiecewiseSchedule:
        """The first optimizer's learning-rate schedule."""
        return next(iter(self.lr_schedules.values()))

    # ------------------------------------------------------------ updates

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, float]:
        """Run the algorithm's update on a sampled batch; return scalar metrics."""
        raise TypeError(f"{type(self).__name__} must implement update_from_batch(batch, timestep)")

    def set_lr_for_timestep(self, timestep: int) -> float:
        """Apply every optimizer's lr schedule at `timestep`; return the first optimizer's lr."""
        first = None
        for name, opt in self.optimizers.items():
            lr = self.lr_schedules[name].value(timestep)
            for group in opt.param_groups:
                group["lr"] = lr
            first = lr if first is None else first
        return float(first)

    def apply_loss(self, loss: torch.Tensor, optimizer_name: str | None = None,
                   params: list[torch.nn.Parameter] | None = None) -> float:
        """Backpropagate `loss`, clip gradients and step one optimizer; return the grad norm.

        `params` (default: all module parameters) are the ones whose gradients are
        cleared and clipped; they must be the optimizer's parameters.
        """
        opt = self.optimizer if optimizer_name is None else self.optimizers[optimizer_name]
        params = self.params if params is None else params
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = clip_gradients(params, self.config.grad_clip, self.config.grad_clip_by)
        opt.step()
        self.num_grad_updates += 1
        return norm

    def step_on(self, optimizer_name: str, loss: torch.Tensor, params: list[torch.Tensor]) -> float:
        """Gradients of `loss` for `params` only, clipped, then one step of that optimizer; the grad norm.

        Unlike `apply_loss`, gradients flow through other networks (e.g. a critic inside an
        actor loss) without being computed for their weights.
        """
        grads = torch.autograd.grad(loss, params)
        for p, g in zip(params, grads):
            p.grad = g
        norm = clip_gradients(params, self.config.grad_clip, self.config.grad_clip_by)
        self.optimizers[optimizer_name].step()
        return norm

    def maybe_update_targets(self, timestep: int, pairs: list[tuple[torch.nn.Module, torch.nn.Module]]) -> bool:
        """Move each (target, online) pair by `tau` when `target_network_update_freq` env steps have passed."""
        if timestep - self._last_target_update < self.config.target_network_update_freq:
            return False
        for target, online in pairs:
            update_target_network(target, online, self.config.tau)
        self._last_target_update = timestep
        return True

    # ------------------------------------------------------------ weights and state

    def get_weights(self) -> dict[str, np.ndarray]:
        """Module weights as NumPy arrays."""
        return self.module.get_state()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load module weights."""
        self.module.set_state(weights)

    def get_extra_state(self) -> dict[str, Any]:
        """Algorithm-specific learner state as JSON-safe values (e.g. PPO's KL coefficient)."""
        return {"num_grad_updates": self.num_grad_updates, "last_target_update": self._last_target_update}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore get_extra_state()."""
        self.num_grad_updates = int(state.get("num_grad_updates", 0))
        self._last_target_update = int(state.get("last_target_update", 0))

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """Tensors outside the module to checkpoint (target networks, ...); none by default."""
        return {}

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore get_extra_tensors()."""
        if tensors:
            raise ValueError(f"{type(self).__name__} keeps no extra tensors, got {sorted(tensors)[:5]}.")


def update_target_network(target: torch.nn.Module, online: torch.nn.Module, tau: float) -> None:
    """target <- tau * online + (1 - tau) * target, over parameters and buffers (tau=1 copies)."""
    with torch.no_grad():
        t_params = list(target.parameters()) + [b for b in target.buffers() if b.dtype.is_floating_point]
        o_params = list(online.parameters()) + [b for b in online.buffers() if b.dtype.is_floating_point]
        if tau >= 1.0:
            torch._foreach_copy_(t_params, o_params)
        else:
            torch._foreach_lerp_(t_params, o_params, tau)


def make_target_network(online: torch.nn.Module) -> torch.nn.Module:
    """A frozen copy of `online` for computing TD targets."""
    import copy

    target = copy.deepcopy(online)
    target.requires_grad_(False)
    return target
