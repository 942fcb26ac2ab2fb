"""Learner: owns a module's optimizer, learning-rate schedule and gradient clipping.

Algorithms subclass it and implement `update_from_batch(batch, timestep) -> metrics`
with their loss; the shared machinery (optimizer construction from `config.optimizer`,
lr schedules, `grad_clip` by value/norm/global_norm, state for checkpoints) lives here.
"""
from __future__ import annotations

import inspect
import logging
import math
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from rlx.core.rl_module import RLModule
from rlx.utils.errors import ConfigError, NonFiniteUpdateError, did_you_mean
from rlx.utils.schedules import PiecewiseSchedule

logger = logging.getLogger("rlx")

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

    Every optimizer step (`apply_loss`, `step_on`) is refused when the loss or the gradient
    norm is NaN or infinite: a NonFiniteUpdateError, or with
    `training(skip_nonfinite_updates=True)` a skipped step counted in
    `num_nonfinite_updates_skipped`. Either way the weights are left as they were. An
    `update_from_batch` calls `begin_update(batch, timestep)` first (the error then names the
    env step and the batch's non-finite columns) and adds `end_update()` to its metrics.

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
        self.num_nonfinite_updates_skipped = 0
        self._last_target_update = 0
        self._skip_nonfinite = bool(getattr(config, "skip_nonfinite_updates", False))
        # The update in progress (see begin_update), read only to explain a non-finite loss.
        self._update_batch: Mapping[str, Any] | None = None
        self._update_timestep: int | None = None
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

    def begin_update(self, batch: Mapping[str, Any], timestep: int) -> None:
        """Note the batch and env-step count of the update starting now (call it first in
        `update_from_batch`, and `end_update` last): an error about a non-finite loss names them."""
        self._update_batch = batch
        self._update_timestep = int(timestep)

    def end_update(self) -> dict[str, int]:
        """Forget the batch noted by `begin_update` (call it last in `update_from_batch`) and return
        the metrics every update adds: `num_nonfinite_updates_skipped` (optimizer steps skipped so
        far) when skip_nonfinite_updates is on, else none."""
        self._update_batch = None
        return {"num_nonfinite_updates_skipped": self.num_nonfinite_updates_skipped} if self._skip_nonfinite else {}

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
                   params: list[torch.nn.Parameter] | None = None,
                   terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Backpropagate `loss`, clip gradients and step one optimizer; return the grad norm.

        `params` (default: all module parameters) are the ones whose gradients are
        cleared and clipped; they must be the optimizer's parameters. `terms` (the loss's
        parts, e.g. {"policy_loss": ..., "vf_loss": ...}) are read only to name the
        non-finite ones when the step is refused (see `check_update`).
        """
        name = next(iter(self.optimizers)) if optimizer_name is None else optimizer_name
        opt = self.optimizers[name]
        params = self.params if params is None else params
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = self.check_update(name, params, loss, terms)
        if math.isfinite(norm):
            opt.step()
            self.num_grad_updates += 1
        return norm

    def step_on(self, optimizer_name: str, loss: torch.Tensor, params: list[torch.Tensor],
                terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Gradients of `loss` for `params` only, clipped, then one step of that optimizer; the grad norm.

        Unlike `apply_loss`, gradients flow through other networks (e.g. a critic inside an
        actor loss) without being computed for their weights. A non-finite loss or gradient
        is handled as in `apply_loss`.
        """
        grads = torch.autograd.grad(loss, params)
        for p, g in zip(params, grads):
            p.grad = g
        norm = self.check_update(optimizer_name, params, loss, terms)
        if math.isfinite(norm):
            self.optimizers[optimizer_name].step()
        return norm

    def check_update(self, optimizer_name: str, params: list[torch.Tensor], loss: torch.Tensor,
                     terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Clip the gradients of `params` and return their norm before clipping; when `loss` or
        that norm is not finite, raise NonFiniteUpdateError, or (skip_nonfinite_updates) clear
        the gradients, count the skip and return the non-finite norm: the caller then must not
        step the optimizer."""
        grads = [p.grad for p in params if p.grad is not None]
        if grads:
            # Adding 0 * loss makes a non-finite loss show in the gradient norm, so the one check
            # below (on the norm clipping reads back anyway) covers both without another host sync.
            # In a LearnerGroup that norm is of the all-reduced gradients: every process agrees.
            grads[0].add_(loss.detach(), alpha=0.0)
        norm = clip_gradients(params, self.config.grad_clip, self.config.grad_clip_by)
        if math.isfinite(norm):
            return norm
        message = self._nonfinite_message(optimizer_name, loss, terms, norm)
        if not self._skip_nonfinite:
            raise NonFiniteUpdateError(f"{message} To skip such updates instead of stopping, set "
                                       "config.training(skip_nonfinite_updates=True).")
        for p in params:
            p.grad = None
        self.num_nonfinite_updates_skipped += 1
        if self.num_nonfinite_updates_skipped == 1:
            logger.warning("%s Skipped (skip_nonfinite_updates=True); later skips are only counted, in the "
                           "learner results' num_nonfinite_updates_skipped.", message)
        return norm

    def _nonfinite_message(self, optimizer_name: str, loss: torch.Tensor,
                           terms: Mapping[str, torch.Tensor] | None, norm: float) -> str:
        values = dict(terms) if terms else {"loss": loss}
        shown = {k: _describe_value(v) for k, v in values.items()}
        bad = [f"{k}={shown[k]}" for k, v in values.items() if not _is_finite(v)]
        if bad:
            what = f"a non-finite loss ({', '.join(bad)})"
        elif not _is_finite(loss):
            what = f"a non-finite loss ({_describe_value(loss)})"
        else:
            finite = ", ".join(f"{k}={v}" for k, v in shown.items())
            what = f"a non-finite gradient norm ({norm}) from a finite loss ({finite})"
        if getattr(clip_gradients, "_rlx_grad_sync", False):  # installed by LearnerGroup processes
            what += (" (the gradients are averaged over the LearnerGroup's processes: another process's shard of "
                     "the batch may hold the NaN or inf)")
        when = f"at env step {self._update_timestep}, " if self._update_timestep is not None else ""
        lr = self.optimizers[optimizer_name].param_groups[0]["lr"]
        return (
            f"{type(self).__name__} (module {type(self.module).__name__}, optimizer '{optimizer_name}') got "
            f"{what} {when}after {self.num_grad_updates} gradient updates. This optimizer step was not taken, "
            f"so the weights are as they were before it. {_batch_hint(self._update_batch)}Check the learning "
            f"rate (lr={float(lr):g}), the scale of rewards and returns (clip_rewards, gamma), unscaled observations "
            "(an observation_filter such as 'MeanStdFilter' helps) and grad_clip."
        )

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
        return {"num_grad_updates": self.num_grad_updates, "last_target_update": self._last_target_update,
                "num_nonfinite_updates_skipped": self.num_nonfinite_updates_skipped}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore get_extra_state()."""
        self.num_grad_updates = int(state.get("num_grad_updates", 0))
        self._last_target_update = int(state.get("last_target_update", 0))
        self.num_nonfinite_updates_skipped = int(state.get("num_nonfinite_updates_skipped", 0))

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """Tensors outside the module to checkpoint (target networks, ...); none by default."""
        return {}

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore get_extra_tensors()."""
        if tensors:
            raise ValueError(f"{type(self).__name__} keeps no extra tensors, got {sorted(tensors)[:5]}.")


def _is_finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return bool(torch.isfinite(value).all())
    return bool(np.all(np.isfinite(value)))


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return f"{float(value):.4g}" if value.numel() == 1 else f"tensor of shape {tuple(value.shape)}"
    return f"{float(value):.4g}"


def _batch_hint(batch: Mapping[str, Any] | None) -> str:
    """'The training batch has non-finite values in ...' naming its float columns with NaN/inf, or ''."""
    if batch is None:
        return ""
    found = []
    for key, column in batch.items():
        if isinstance(column, torch.Tensor):
            column = column.detach().cpu().numpy()
        if isinstance(column, np.ndarray) and column.dtype.kind in "fc" and column.size:
            count = int(column.size - np.count_nonzero(np.isfinite(column)))
            if count:
                found.append(f"'{key}' ({count} of {column.size} values)")
    if not found:
        return ""
    return (f"The training batch itself has non-finite values in {', '.join(found)}: find where they come from "
            "(the env, a callback, a connector or the replay buffer). ")


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
