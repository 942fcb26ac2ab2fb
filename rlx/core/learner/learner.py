"""Learner: owns a module's optimizers, learning-rate schedules and gradient clipping.

Algorithms subclass it and implement `update_from_batch(batch, timestep) -> metrics`
with their loss; the shared machinery (optimizer construction from `config.optimizer`,
lr schedules, `grad_clip` by value/norm/global_norm, state for checkpoints) lives here.

RLlib's Learner API for custom learners is here too: `configure_optimizers_for_module`
with `register_optimizer`, `compute_losses` / `compute_loss_for_module` (the algorithms
whose loss goes through them say so: PPO), `get_optimizer`, `get_parameters`,
`self.module[module_id]`, `self.metrics` (a MetricsLogger whose values join the learner
results) and the `before_/after_gradient_based_update` hooks. Torch learning-rate
schedulers from `config.experimental(_torch_lr_scheduler_classes=[...])` are attached to
every optimizer and stepped once after every update (`update_from_batch`).

A Learner that implements only the loss (`compute_loss_for_module`) trains as RLlib's does:
`build()` adds the learner connector pipeline, `update(batch=... | episodes=...)` runs it on
episodes and steps the optimizers per minibatch (`loss_api_update`).
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import logging
import math
import sys
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import torch

from rlx.core import ALL_MODULES, DEFAULT_MODULE_ID
from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.loss_api import loss_api_update, module_part, run_episodes_connector
from rlx.core.learner.nonfinite import batch_hint, describe_value, is_finite
from rlx.core.learner.target_networks import update_target_network
from rlx.core.learner.precision import Precision
from rlx.core.learner.allocator import keep_freed_memory
from rlx.core.learner.threads import update_thread_chooser
from rlx.core.learner.device import learner_device, module_device, to_device
from rlx.core.modelv2 import ModelV2
from rlx.core.rl_module.apis import SelfSupervisedLossAPI
from rlx.core.rl_module.agent_mapping import is_trainable
from rlx.core.rl_module.multi_rl_module import MultiRLModule
from rlx.core.rl_module.rl_module import RLModule
from rlx.core.sample_batch import SampleBatch
from rlx.utils.errors import ConfigError, NonFiniteUpdateError, did_you_mean
from rlx.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME
from rlx.utils.metrics.metrics_logger import MetricsLogger
from rlx.utils.schedules import PiecewiseSchedule

logger = logging.getLogger("rlx")

_OWN_OPTIMIZERS = ("adam", "adamw", "sgd")

_UNSET = object()

#: RLlib's name of a module's only (or main) optimizer. rlx stores that optimizer as "default"
#: (its name in checkpoints); `get_optimizer` and `register_optimizer` accept either name.
DEFAULT_OPTIMIZER = "default_optimizer"
_DEFAULT_NAME = "default"
#: Keys of the loss terms in learner results (RLlib's names).
POLICY_LOSS_KEY = "policy_loss"
VF_LOSS_KEY = "vf_loss"
ENTROPY_KEY = "entropy"
#: Suffix of the per-optimizer learning-rate metrics (RLlib's name).
LR_KEY = "learning_rate"

# The module id of the Learner being built (see `building_learner_for`); DEFAULT_MODULE_ID
# for a single-agent Learner.
_BUILDING_MODULE_ID: contextvars.ContextVar[str] = contextvars.ContextVar("rlx_learner_module_id",
                                                                        default=DEFAULT_MODULE_ID)


@contextlib.contextmanager
def building_learner_for(module_id: str) -> Iterator[None]:
    """Learners built inside this block train the module `module_id` (their `module_id`, the key
    of `self.module[...]`); the learner container (rlx.core.learner.container) builds each
    module's Learner in one."""
    token = _BUILDING_MODULE_ID.set(module_id)
    try:
        yield
    finally:
        _BUILDING_MODULE_ID.reset(token)


class SingleModuleView:
    """A Learner's module as RLlib's Learner code sees it: the RLModule itself (every attribute
    and method is the module's) that is also a one-entry mapping {module_id: module}, so that
    `self.module[module_id]`, `self.module.keys()` and `for mid in self.module` work as on
    RLlib's MultiRLModule. `isinstance(view, RLModule)` holds; `view.unwrapped_module` is the
    module object itself.
    """

    __slots__ = ("unwrapped_module", "module_id", "__weakref__")  # weakref: torch.compile guards on it

    def __init__(self, module: Any, module_id: str):
        object.__setattr__(self, "unwrapped_module", module)
        object.__setattr__(self, "module_id", module_id)

    # --- the mapping {module_id: module}
    def __getitem__(self, module_id: str) -> Any:
        if module_id == self.module_id:
            return self.unwrapped_module
        raise KeyError(f"Unknown module id {module_id!r}: this Learner trains the module {self.module_id!r}.")

    def __contains__(self, module_id: object) -> bool:
        return module_id == self.module_id

    def __iter__(self) -> Iterator[str]:
        return iter((self.module_id,))

    def __len__(self) -> int:
        return 1

    def keys(self) -> list[str]:
        """[module_id]."""
        return [self.module_id]

    def values(self) -> list[Any]:
        """[the module]."""
        return [self.unwrapped_module]

    def items(self) -> list[tuple[str, Any]]:
        """[(module_id, the module)]."""
        return [(self.module_id, self.unwrapped_module)]

    def get(self, module_id: str, default: Any = None) -> Any:
        """The module when `module_id` is its id, else `default`."""
        return self.unwrapped_module if module_id == self.module_id else default

    # --- everything else is the module's
    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "unwrapped_module"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.unwrapped_module, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self.unwrapped_module, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.unwrapped_module(*args, **kwargs)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(view, RLModule) and friends see the module's class
        return type(self.unwrapped_module)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.unwrapped_module)) | {"keys", "values", "items", "get", "unwrapped_module"})

    def __repr__(self) -> str:
        return repr(self.unwrapped_module)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (SingleModuleView, (self.unwrapped_module, self.module_id))


def unwrap_module(module: Any) -> Any:
    """The RLModule behind a Learner's `module` (a SingleModuleView), or `module` itself."""
    if type(module) is SingleModuleView:
        return module.unwrapped_module
    return module


def build_optimizer(params: Iterable[torch.Tensor], lr: float, options: dict[str, Any],
                    torch_optim: bool = False) -> Any:
    """Create the optimizer named by `options['type']` (default Adam) with the other keys as kwargs.

    'adam', 'adamw' and 'sgd' use rlx's foreach implementations (with `torch_optim=True`,
    torch.optim's, which torch's lr schedulers need); any other name is looked up in
    torch.optim (e.g. 'RMSprop', 'Adagrad').
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
    if torch_optim and lowered in _OWN_OPTIMIZERS:
        decoupled = options.pop("decoupled", False)
        cls = torch.optim.SGD if lowered == "sgd" else (torch.optim.AdamW if decoupled else torch.optim.Adam)
    return cls(params, lr=lr, **options)


def _clip_gradients_fn() -> Callable[..., float]:
    """rlx.core.learner.clip_gradients as it is now: a LearnerGroup process replaces it (in the
    package or in this module) with one that averages the gradients over its processes first."""
    own = globals()["clip_gradients"]
    package = sys.modules.get(__package__ or "")
    patched = getattr(package, "clip_gradients", own)
    return patched if patched is not _ORIGINAL_CLIP else own


def clip_gradients(params: Sequence[torch.Tensor], grad_clip: float | None, clip_by: str) -> float:
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


_ORIGINAL_CLIP = clip_gradients


def clip_gradients_dict(gradients_dict: Mapping[Any, torch.Tensor], *, grad_clip: float | None = None,
                        grad_clip_by: str = "value") -> float | None:
    """RLlib's form of gradient clipping (`Learner._get_clip_function()`): clip the gradient
    tensors of `gradients_dict` in place by 'value', 'norm' (each tensor) or 'global_norm' (all
    together); returns the global norm before clipping for 'global_norm', else None."""
    grads = [g for g in gradients_dict.values() if g is not None]
    if grad_clip is None or not grads:
        return None
    if grad_clip_by == "value":
        for g in grads:
            g.clamp_(-grad_clip, grad_clip)
        return None
    if grad_clip_by == "norm":
        for g in grads:
            norm = torch.linalg.vector_norm(g)
            g.mul_(torch.clamp(grad_clip / (norm + 1e-6), max=1.0))
        return None
    if grad_clip_by == "global_norm":
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        torch._foreach_mul_(grads, torch.clamp(grad_clip / (total + 1e-6), max=1.0))
        return float(total)
    raise ConfigError(f"grad_clip_by must be 'value', 'norm' or 'global_norm', got {grad_clip_by!r}.")


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

    RLlib's Learner API (for `config.training(learner_class=...)` subclasses):

    - `self.module[module_id]` is the module (`self.module` is the module itself too, and a
      one-entry mapping {module_id: module}); `self.module_id` is its id
      ("default_policy" unless multi-agent).
    - `configure_optimizers_for_module(module_id, config)` registers the optimizers with
      `register_optimizer(module_id=, optimizer_name=, optimizer=, params=,
      lr_or_lr_schedule=)`; the default is one optimizer from `config.optimizer` over all
      parameters with `config.lr`. With several optimizers, one backward pass of the loss
      feeds them all and each clips and steps its own parameters.
    - `compute_losses(fwd_out=, batch=)` -> {module_id: loss} and
      `compute_loss_for_module(module_id=, config=, batch=, fwd_out=)` -> loss compute the
      loss, in the algorithms whose update goes through them (PPO).
    - `self.metrics` is a MetricsLogger: what is logged under (module_id, name) or name
      appears in this module's learner results as `name` after every update.
    - `before_gradient_based_update(timesteps=)` / `after_gradient_based_update(timesteps=)`
      run at the start and end of every update; the latter steps the torch lr schedulers of
      `config.experimental(_torch_lr_scheduler_classes=...)`.

    Args:
        config: the Algorithm's (frozen) config.
        module: the module to train (shared with the local EnvRunner).
    """

    #: Whether `update_from_batch` reads time-major [T, B] columns (e.g. to estimate advantages
    #: along each trajectory, as PPO, PG, A2C, IMPALA and APPO do): `update(episodes=...)` then
    #: hands it the episodes one per column, VALID marking the real rows, instead of flat rows.
    trains_on_time_major_batches: bool = False

    def __init__(self, config: ResolvedConfig, module: RLModule):
        module = unwrap_module(module)
        self.config = config
        #: Where this Learner computes (see rlx.core.learner.device); the module is moved there.
        self.device = learner_device(config) if hasattr(config, "learner_device") else torch.device("cpu")
        if module_device(module) != self.device:
            module.to(self.device)
        # A MultiRLModule whose forward couples its modules (MultiRLModule.runs_modules_jointly)
        # trains in one Learner: `self.module` is then that MultiRLModule and `module_id` ALL_MODULES.
        joint = isinstance(module, MultiRLModule)
        self.module_id: str = ALL_MODULES if joint else _BUILDING_MODULE_ID.get()
        self.module: Any = module if joint else SingleModuleView(module, self.module_id)
        #: {optimizer name: the module id it was registered for (ALL_MODULES: every module's)}.
        self._optimizer_modules: dict[str, str] = {}
        self.metrics = MetricsLogger()
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
        # The parameters each optimizer steps, and the torch lr schedulers attached to it.
        self._optimizer_params: dict[str, Sequence[torch.Tensor]] = {}
        self._torch_lr_schedulers: dict[str, list[Any]] = {}
        self._custom_loss_model = _model_with_custom_loss(module)
        #: Mixed precision (autocast dtype, loss scaler) from mixed_precision / _torch_grad_scaler_class.
        self.precision = Precision(config, self.device)
        self._precision_attached = False
        #: torch threads for updates (rlx.core.learner.threads), decided at the first update.
        self._update_threads: Any = _UNSET
        # torch_compile_learner (rlx.core.learner.compile): the networks, compiled at the first update
        # ("forward_train"), or the whole update, compiled after the first one ("complete_update").
        self._compiled = not getattr(config, "torch_compile_learner", False)
        self._compiled_update: Callable[..., Any] | None = None
        if not self._compiled:
            from rlx.core.learner.compile import check_learner_can_compile_update, compiles_complete_update

            if compiles_complete_update(config):
                check_learner_can_compile_update(self)
                self._compiled_update = self.update_from_batch  # eager for the first update, as RLlib does
        self.configure_optimizers()
        if not self.optimizers:
            raise TypeError(f"{type(self).__name__}.configure_optimizers() registered no optimizer: register one "
                            "with self.register_optimizer(...) (or self.add_optimizer(...)).")

    def tensor(self, value: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        """`value` (a NumPy array, number or tensor) as a tensor on this Learner's device; arrays
        are not copied on the CPU."""
        return to_device(torch.as_tensor(value, dtype=dtype), self.device)

    def td_inputs(self, batch: Mapping[str, Any]
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The tensors of a replayed batch that TD targets read, on this Learner's device:
        (obs, next_obs, rewards, discounts = gamma ** n_step for steps that did not terminate,
        importance weights or None)."""
        from rlx.core.columns import Columns

        obs = self.tensor(batch[Columns.OBS])
        next_obs = self.tensor(batch[Columns.NEXT_OBS])
        rewards = self.tensor(batch[Columns.REWARDS]).float()
        not_done = 1.0 - self.tensor(batch[Columns.TERMINATEDS]).float()
        n_step = self.tensor(np.asarray(batch.get("n_step", 1))).float()
        weights = self.tensor(batch[Columns.WEIGHTS]).float() if Columns.WEIGHTS in batch else None
        return obs, next_obs, rewards, self.config.gamma ** n_step * not_done, weights

    @property
    def rl_module(self) -> RLModule:
        """The module this Learner trains (the object itself, not the view `self.module`; the
        MultiRLModule for a Learner of all modules)."""
        return unwrap_module(self.module)

    @property
    def trains_all_modules(self) -> bool:
        """Whether this Learner trains a whole MultiRLModule (one whose forward couples its
        modules) rather than one module."""
        return self.module_id == ALL_MODULES

    # ------------------------------------------------------------ optimizers

    def configure_optimizers(self) -> None:
        """Create the optimizers: by default `configure_optimizers_for_module` of each module
        (this Learner's one, or every module of the MultiRLModule it trains)."""
        for module_id in self.module.keys():
            if self.rl_module_is_compatible(self.module[module_id]):
                self.configure_optimizers_for_module(module_id, config=self._module_config(module_id))

    def _module_config(self, module_id: str) -> ResolvedConfig:
        """The config of `module_id`: this Learner's (per-module configs are given to each module's
        own Learner), or for a Learner of all modules that module's (`get_config_for_module`)."""
        get = getattr(self.config, "get_config_for_module", None)
        return get(module_id) if self.trains_all_modules and callable(get) else self.config

    def configure_optimizers_for_module(self, module_id: str, config: ResolvedConfig | None = None) -> None:
        """Register the optimizers of `module_id` (RLlib's hook; override it to use other or several
        optimizers, calling `register_optimizer` for each). The default is one optimizer
        ("default") built from `config.optimizer` over all module parameters with `config.lr`."""
        config = self.config if config is None else config
        if not self.trains_all_modules:
            self.add_optimizer(_DEFAULT_NAME, self.params, config.lr)
            return
        params = [p for p in self.module[module_id].parameters() if p.requires_grad]
        if params:  # (a module without parameters, e.g. a heuristic policy, gets no optimizer)
            self.add_optimizer(self._optimizer_key(module_id, DEFAULT_OPTIMIZER), params, config.lr)
            self._optimizer_modules[self._optimizer_key(module_id, DEFAULT_OPTIMIZER)] = module_id

    def _optimizer_key(self, module_id: str, optimizer_name: str) -> str:
        """Where optimizer `optimizer_name` of `module_id` is kept in `self.optimizers`: its name
        (DEFAULT_OPTIMIZER as "default"), prefixed "<module_id>_" in a Learner of all modules for
        an optimizer of one module (RLlib's full registration name)."""
        name = _DEFAULT_NAME if optimizer_name == DEFAULT_OPTIMIZER else str(optimizer_name)
        if self.trains_all_modules and module_id != ALL_MODULES:
            return f"{module_id}_{name}"
        return name

    def _knows_module(self, module_id: str) -> bool:
        return module_id in (self.module_id, ALL_MODULES) or (self.trains_all_modules and module_id in self.module)

    def add_optimizer(self, name: str, params: Sequence[torch.Tensor], lr: Any) -> Any:
        """Register an optimizer named `name` over `params` with lr given as a float or a schedule."""
        schedule = PiecewiseSchedule(lr)
        self.lr_schedules[name] = schedule
        # torch's lr schedulers work on torch.optim optimizers only.
        torch_optim = bool(getattr(self.config, "_torch_lr_scheduler_classes", None))
        self.optimizers[name] = build_optimizer(params, schedule.value(0), self.config.optimizer, torch_optim)
        self._optimizer_params[name] = params
        self._attach_torch_lr_schedulers(name)
        return self.optimizers[name]

    def register_optimizer(self, *, module_id: str = ALL_MODULES, optimizer_name: str = DEFAULT_OPTIMIZER,
                           optimizer: Any, params: Sequence[torch.Tensor], lr_or_lr_schedule: Any = None) -> None:
        """Register an optimizer you built (RLlib's API): `optimizer` steps `params` (which must be
        its parameters). With `lr_or_lr_schedule` (a float or [[timestep, lr], ...]) rlx sets its
        learning rate from that schedule before every update; without, its lr is left alone.

        `optimizer_name` tells several optimizers of one module apart; DEFAULT_OPTIMIZER is stored
        as "default". `module_id` must be this Learner's module (or ALL_MODULES).
        """
        if not self._knows_module(module_id):
            raise ValueError(f"register_optimizer(module_id={module_id!r}): this {type(self).__name__} trains "
                             f"the module {self.module_id!r}.")
        name = self._optimizer_key(module_id, optimizer_name)
        if name in self.optimizers:
            raise ValueError(f"An optimizer named {optimizer_name!r} is registered already for module "
                             f"{self.module_id!r}; give each optimizer its own optimizer_name.")
        if not isinstance(optimizer, torch.optim.Optimizer) and not hasattr(optimizer, "param_groups"):
            raise TypeError(f"register_optimizer needs a torch optimizer, got {type(optimizer).__name__}.")
        params = list(params)
        own = {id(p) for group in optimizer.param_groups for p in group["params"]}
        strangers = sum(1 for p in params if id(p) not in own)
        if strangers:
            raise ValueError(f"register_optimizer(optimizer_name={optimizer_name!r}): {strangers} of the {len(params)} "
                             "params are not parameters of the optimizer; build the optimizer over the same params.")
        if lr_or_lr_schedule is not None:
            schedule = PiecewiseSchedule(lr_or_lr_schedule)
            self.lr_schedules[name] = schedule
            self._set_optimizer_lr(optimizer, schedule.value(0))
        self.optimizers[name] = optimizer
        self._optimizer_params[name] = params
        self._optimizer_modules[name] = module_id
        self._attach_torch_lr_schedulers(name)

    def _attach_torch_lr_schedulers(self, name: str) -> None:
        """Build the torch lr schedulers of config._torch_lr_scheduler_classes on optimizer `name`."""
        classes = getattr(self.config, "_torch_lr_scheduler_classes", None)
        if not classes:
            return
        if isinstance(classes, Mapping):
            classes = classes.get(self.module_id) or []
        optimizer = self.optimizers[name]
        # Built in order: each scheduler starts from the lr the ones before it set.
        self._torch_lr_schedulers[name] = [cls(optimizer) for cls in classes]

    def get_optimizer(self, module_id: str = DEFAULT_MODULE_ID, optimizer_name: str = DEFAULT_OPTIMIZER) -> Any:
        """The optimizer `optimizer_name` of `module_id` (RLlib's API)."""
        if not self._knows_module(module_id):
            raise KeyError(f"Unknown module id {module_id!r}: this {type(self).__name__} trains the module "
                           f"{self.module_id!r}.")
        name = self._optimizer_key(module_id, optimizer_name)
        if name not in self.optimizers:  # (in a Learner of all modules: one registered for all of them)
            name = self._optimizer_key(ALL_MODULES, optimizer_name)
        if name not in self.optimizers:
            names = [DEFAULT_OPTIMIZER if n == _DEFAULT_NAME else n for n in self.optimizers]
            raise KeyError(f"No optimizer named {optimizer_name!r}.{did_you_mean(str(optimizer_name), names)} "
                           f"This Learner has {names}.")
        return self.optimizers[name]

    def get_optimizers_for_module(self, module_id: str = ALL_MODULES) -> list[tuple[str, Any]]:
        """[(optimizer_name, optimizer)] of `module_id` (the default one named DEFAULT_OPTIMIZER)."""
        if not self._knows_module(module_id):
            return []
        return [(DEFAULT_OPTIMIZER if n == _DEFAULT_NAME else n, o) for n, o in self.optimizers.items()
                if module_id in (self.module_id, ALL_MODULES)
                or self._optimizer_modules.get(n, ALL_MODULES) in (module_id, ALL_MODULES)]

    def get_parameters(self, module: Any) -> list[torch.Tensor]:
        """The parameters of `module` (any torch module, e.g. `self.module[module_id].pi`)."""
        return list(module.parameters())

    def get_param_ref(self, param: torch.Tensor) -> torch.Tensor:
        """A hashable reference to `param` (the tensor itself)."""
        return param

    def rl_module_is_compatible(self, module: Any) -> bool:
        """Whether this Learner can train `module` (any module; override to restrict)."""
        return True

    @staticmethod
    def _get_optimizer_lr(optimizer: Any) -> float:
        """The learning rate of `optimizer` (its first param group's)."""
        return float(optimizer.param_groups[0]["lr"])

    @staticmethod
    def _set_optimizer_lr(optimizer: Any, lr: float) -> None:
        """Set every param group of `optimizer` to `lr`."""
        for group in optimizer.param_groups:
            group["lr"] = lr

    @staticmethod
    def _get_clip_function() -> Callable[..., Any]:
        """RLlib's gradient clipping function: fn(gradients_dict, *, grad_clip, grad_clip_by)."""
        return clip_gradients_dict

    @property
    def optimizer(self) -> Any:
        """The first (for most algorithms the only) optimizer."""
        return next(iter(self.optimizers.values()))

    @property
    def lr_schedule(self) -> PiecewiseSchedule:
        """The first optimizer's learning-rate schedule."""
        return next(iter(self.lr_schedules.values()))

    # ------------------------------------------------------------ losses (RLlib's API)

    def compute_losses(self, *, fwd_out: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
        """{module_id: loss} from {module_id: forward_train output} and {module_id: batch}: by default
        `compute_loss_for_module` of each module, or a SelfSupervisedLossAPI module's own
        `compute_self_supervised_loss`."""
        losses = {}
        for module_id, out in fwd_out.items():
            module = unwrap_module(self.module[module_id])
            if isinstance(module, SelfSupervisedLossAPI):
                losses[module_id] = module.compute_self_supervised_loss(
                    learner=self, module_id=module_id, config=self.config, batch=batch[module_id], fwd_out=out)
            else:
                losses[module_id] = self.compute_loss_for_module(module_id=module_id, config=self.config,
                                                                 batch=batch[module_id], fwd_out=out)
        return losses

    def compute_loss_for_module(self, *, module_id: str, config: ResolvedConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        """The total loss of `module_id` on `batch` given the module's `forward_train` output
        `fwd_out` (algorithms whose loss goes through this hook implement it)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement compute_loss_for_module.")

    def _overrides(self, name: str) -> bool:
        """Whether this Learner's class overrides the base Learner's method `name`."""
        return getattr(type(self), name) is not getattr(Learner, name)

    # ------------------------------------------------------------ updates

    def update_from_batch(self, batch: dict[str, np.ndarray], timestep: int) -> dict[str, float]:
        """Run the algorithm's update on a sampled batch; return scalar metrics.

        Algorithms implement it. A Learner that implements RLlib's `compute_loss_for_module` (or
        `compute_losses`), or trains a SelfSupervisedLossAPI module, instead gets RLlib's update: per minibatch (see `update`'s num_epochs,
        minibatch_size, shuffle_batch_per_epoch; one pass over the whole batch by default), the
        module's `forward_train`, the losses, one backward pass and every optimizer's step."""
        if not (self._overrides("compute_loss_for_module") or self._overrides("compute_losses")
                or isinstance(self.rl_module, SelfSupervisedLossAPI)):
            raise TypeError(f"{type(self).__name__} must implement update_from_batch(batch, timestep), or RLlib's "
                            "compute_loss_for_module(module_id=, config=, batch=, fwd_out=).")
        return loss_api_update(self, batch, timestep, **self._update_options)

    #: update()'s minibatching options for the update_from_batch under way (see loss_api_update).
    _update_options: dict[str, Any] = {}

    def build(self) -> None:
        """RLlib's `Learner.build()`: finish setting this Learner up once (later calls do nothing).
        rlx's constructor already built the module and optimizers; this adds the learner connector
        pipeline `update(episodes=...)` runs (`self._learner_connector`: the one the Algorithm
        gives, else `config.build_learner_connector()`). Override it (calling super) to e.g.
        prepend connector pieces."""
        if getattr(self, "_is_built", False):
            return
        if getattr(self, "_learner_connector", None) is None:
            make = getattr(self.config, "build_learner_connector", None)
            self._learner_connector = make(input_observation_space=None, input_action_space=None,
                                           device=self.device) if callable(make) else None
        self._is_built = True

    def update(self, batch: Any = None, episodes: list[Any] | None = None, timesteps: dict[str, Any] | None = None,
               *, num_epochs: int = 1, minibatch_size: int | None = None, shuffle_batch_per_epoch: bool = False,
               **kwargs: Any) -> dict[str, dict[str, Any]]:
        """RLlib's `Learner.update`: one update on `batch` (this module's columns, or a
        MultiAgentBatch / {module_id: columns} holding them) or on `episodes` (run through
        `self._learner_connector`); {module_id: metrics}, empty when the data holds nothing of
        this Learner's module. `timesteps[NUM_ENV_STEPS_SAMPLED_LIFETIME]` drives lr schedules."""
        if kwargs:
            raise TypeError(f"{type(self).__name__}.update() got unsupported arguments {sorted(kwargs)}; rlx's "
                            "Learner.update takes batch=, episodes=, timesteps=, num_epochs=, minibatch_size=, "
                            "shuffle_batch_per_epoch=.")
        if (batch is None) == (episodes is None):
            raise ValueError("Learner.update() needs exactly one of batch= and episodes=.")
        if not getattr(self, "_is_built", False):
            self.build()
        if episodes is not None:
            if self._learner_connector is None:
                raise RuntimeError(f"{type(self).__name__}.update(episodes=...) needs a learner connector pipeline: "
                                   "build the Learner with an AlgorithmConfig (config.build_learner_connector).")
            batch = run_episodes_connector(self._learner_connector, type(self), rl_module=self.module,
                                           episodes=list(episodes), metrics=self.metrics)
        batch = self.training_part(batch)
        if batch is None:
            return {}
        timestep = int((timesteps or {}).get(NUM_ENV_STEPS_SAMPLED_LIFETIME) or 0)
        self._update_options = {"num_epochs": num_epochs, "minibatch_size": minibatch_size,
                                "shuffle": shuffle_batch_per_epoch}
        try:
            metrics = self.run_update(batch, timestep)
        finally:
            self._update_options = {}
        return self.results_by_module(metrics)

    def training_part(self, batch: Any) -> Any:
        """The part of `batch` this Learner trains on: its module's columns (see `module_part`), or
        for a Learner of all modules {module_id: columns} of the modules it holds that train
        (`policies_to_train`); None when there is none."""
        if not self.trains_all_modules:
            return module_part(batch, self.module_id)
        to_train = getattr(self.config, "policies_to_train", None)
        parts = {mid: columns for mid, columns in getattr(batch, "policy_batches", batch).items()
                 if mid in self.module and is_trainable(to_train, mid, SampleBatch(columns) if callable(to_train)
                                                        else columns)}
        return parts or None

    def results_by_module(self, metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """{module_id: metrics} of an update's metrics: this Learner's module's, or (a Learner of all
        modules) each module's own results with the ones logged for all modules in each of them."""
        if not self.trains_all_modules:
            return {self.module_id: metrics}
        shared = {k: v for k, v in metrics.items() if not (k in self.module and isinstance(v, dict))}
        return {mid: {**shared, **value} for mid, value in metrics.items()
                if mid in self.module and isinstance(value, dict)}

    def forward_train_modules(self, batch: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """{module_id: forward_train output} on {module_id: batch}: this Learner's module's own
        forward_train, or the forward_train of the MultiRLModule it trains (which may couple its
        modules, e.g. run a shared encoder before each policy)."""
        if self.trains_all_modules:
            return self.rl_module.forward_train(batch)
        return {self.module_id: self.rl_module.forward_train(batch[self.module_id])}

    def run_update(self, batch: Any, timestep: int) -> Any:
        """`update_from_batch` as the Algorithm runs it: under the config's mixed precision, on the
        module compiled by torch_compile_learner (compiled at the first update, once every network
        of the Learner exists; with what_to_compile='complete_update' the whole update_from_batch
        runs compiled from the second update on), with the torch thread count of
        rlx.core.learner.threads, and with the loss scaler's metrics added."""
        update = self.update_from_batch
        if self._compiled_update is not None:
            update = self._compiled_update
            if not self._compiled:
                from rlx.core.learner.compile import compile_update

                self._compiled_update = compile_update(self.update_from_batch, self.config)
                self._compiled = True
        elif not self._compiled:
            from rlx.core.learner.compile import compile_learner_module

            compile_learner_module(self.rl_module, self.config)
            self._compiled = True
        if self.precision.dtype is not None and not self._precision_attached:
            # At the first update, once every network exists (target networks included).
            self.precision.attach(*[v for v in vars(self).values() if isinstance(v, torch.nn.Module)],
                                  self.rl_module)
            self._precision_attached = True
        threads = self._update_threads
        if threads is _UNSET:
            threads = self._update_threads = update_thread_chooser(
                self.config, sum(p.numel() for p in self.params), self.device.type)
            if self.device.type == "cpu":
                keep_freed_memory()  # no page faults for each update's activations (rlx.core.learner.allocator)
        with threads.applied(), self.precision.autocast():
            metrics = update(batch, timestep=timestep)
        if self.precision.scaler is not None and isinstance(metrics, dict):
            metrics.update(self.precision.metrics())
        return metrics

    def before_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Called at the start of every update (RLlib's hook); does nothing by default."""

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Called at the end of every update (RLlib's hook): steps the torch lr schedulers of
        `config.experimental(_torch_lr_scheduler_classes=...)`; override it (calling super) for
        other non-gradient updates."""
        for schedulers in self._torch_lr_schedulers.values():
            for scheduler in schedulers:
                scheduler.step()

    def begin_update(self, batch: Mapping[str, Any], timestep: int) -> None:
        """Note the batch and env-step count of the update starting now (call it first in
        `update_from_batch`, and `end_update` last): an error about a non-finite loss names them."""
        self._update_batch = batch
        self._update_timestep = int(timestep)
        self.before_gradient_based_update(timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: int(timestep)})

    def end_update(self) -> dict[str, Any]:
        """Finish the update begun by `begin_update` (call it last in `update_from_batch`): run
        `after_gradient_based_update`, forget the batch and return the metrics every update adds:
        `num_nonfinite_updates_skipped` (optimizer steps skipped so far) when skip_nonfinite_updates
        is on, the learning rate of each optimizer a torch lr scheduler drives, and whatever was
        logged to `self.metrics` (under this module's id or at the top level)."""
        self.after_gradient_based_update(timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: self._update_timestep or 0})
        self._update_batch = None
        out: dict[str, Any] = (
            {"num_nonfinite_updates_skipped": self.num_nonfinite_updates_skipped} if self._skip_nonfinite else {}
        )
        for name in self._torch_lr_schedulers:
            optimizer_name = DEFAULT_OPTIMIZER if name == _DEFAULT_NAME else name
            out[f"{optimizer_name}_{LR_KEY}"] = self._get_optimizer_lr(self.optimizers[name])
        logged = self.metrics.reduce(compile=True)
        if logged:
            for key, value in logged.items():
                if key in (self.module_id, ALL_MODULES) and isinstance(value, dict):
                    out.update(value)
                else:
                    out[key] = value
        return out

    def set_lr_for_timestep(self, timestep: int) -> float:
        """Apply the lr schedules at `timestep` (of every optimizer that has one and no torch lr
        scheduler); return the first optimizer's lr."""
        for name, schedule in self.lr_schedules.items():
            if name in self._torch_lr_schedulers:
                continue  # its torch lr schedulers set its lr
            lr = schedule.value(timestep)
            for group in self.optimizers[name].param_groups:
                group["lr"] = lr
        return self._get_optimizer_lr(self.optimizer)

    def apply_loss(self, loss: torch.Tensor, optimizer_name: str | None = None,
                   params: Sequence[torch.Tensor] | None = None,
                   terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Backpropagate `loss`, clip gradients and step one optimizer; return the grad norm.

        `params` (default: the optimizer's parameters, for the first optimizer all module
        parameters) are the ones whose gradients are cleared and clipped; they must be the
        optimizer's parameters. `terms` (the loss's parts, e.g. {"policy_loss": ...,
        "vf_loss": ...}) are read only to name the non-finite ones when the step is refused
        (see `check_update`).
        """
        name = next(iter(self.optimizers)) if optimizer_name is None else optimizer_name
        opt = self.optimizers[name]
        loss = self.add_model_custom_loss(loss)
        if params is None:
            params = self.params if optimizer_name is None else self._optimizer_params.get(name, self.params)
        opt.zero_grad(set_to_none=True)
        self.precision.backward(loss)
        norm = self.check_update(name, params, loss, terms)
        if math.isfinite(norm):
            self.precision.step(opt)
            self.num_grad_updates += 1
        self.precision.update()
        return norm

    def apply_loss_to_all_optimizers(self, loss: torch.Tensor,
                                     terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Backpropagate `loss` once, then let every optimizer clip and step its own parameters
        (RLlib's semantics for a module with several optimizers: each takes the gradient of the
        one total loss for its parameters). Returns the global norm over all of them; an optimizer
        whose gradients are not finite is handled as in `apply_loss`."""
        if len(self.optimizers) == 1:
            name = next(iter(self.optimizers))
            return self.apply_loss(loss, name, self._optimizer_params[name], terms)
        loss = self.add_model_custom_loss(loss)
        for p in self.params:
            p.grad = None
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=True)
        self.precision.backward(loss)
        total_sq = 0.0
        stepped = False
        for name, opt in self.optimizers.items():
            norm = self.check_update(name, self._optimizer_params[name], loss, terms)
            total_sq += norm * norm
            if math.isfinite(norm):
                self.precision.step(opt)
                stepped = True
        self.precision.update()
        if stepped:
            self.num_grad_updates += 1
        return math.sqrt(total_sq)

    def add_model_custom_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """`loss` changed by the old-API model's `custom_loss([loss], train_batch)` when the module
        runs a ModelV2 that overrides it (RLlib's old stack calls it on every loss), with the
        model's `metrics()` logged into this update's results; otherwise `loss` itself."""
        model = self._custom_loss_model
        if model is None:
            return loss
        result = model.custom_loss([loss], self._update_batch if self._update_batch is not None else {})
        if isinstance(result, (list, tuple)):
            if len(result) != 1:
                from rlx.utils.errors import NotSupportedYetError

                raise NotSupportedYetError(
                    f"{type(model).__name__}.custom_loss returning {len(result)} losses",
                    "a custom loss with an optimizer of its own",
                    fix="Return [policy_loss[0] + your_loss] (one loss per optimizer; rlx's default has one).")
            result = result[0]
        if not isinstance(result, torch.Tensor) or result.dim() != 0:
            raise TypeError(f"{type(model).__name__}.custom_loss must return a list of scalar loss tensors (or one "
                            f"scalar tensor), got {type(result).__name__}.")
        for key, value in (model.metrics() or {}).items():
            value = value.detach() if isinstance(value, torch.Tensor) else value
            try:
                self.metrics.log_value(key, float(value))
            except (TypeError, ValueError):
                continue  # a metric that is not one number is not a learner result
        return result

    def step_on(self, optimizer_name: str, loss: torch.Tensor, params: Sequence[torch.Tensor],
                terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Gradients of `loss` for `params` only, clipped, then one step of that optimizer; the grad norm.

        Unlike `apply_loss`, gradients flow through other networks (e.g. a critic inside an
        actor loss) without being computed for their weights. A non-finite loss or gradient
        is handled as in `apply_loss`.
        """
        grads = self.precision.grad(loss, params)
        for p, g in zip(params, grads):
            p.grad = g
        norm = self.check_update(optimizer_name, params, loss, terms)
        if math.isfinite(norm):
            self.precision.step(self.optimizers[optimizer_name])
        self.precision.update()
        return norm

    def check_update(self, optimizer_name: str, params: Sequence[torch.Tensor], loss: torch.Tensor,
                     terms: Mapping[str, torch.Tensor] | None = None) -> float:
        """Clip the gradients of `params` and return their norm before clipping; when `loss` or
        that norm is not finite, raise NonFiniteUpdateError, or (skip_nonfinite_updates) clear
        the gradients, count the skip and return the non-finite norm: the caller then must not
        step the optimizer. With a loss scaler the gradients are unscaled first, and a finite loss
        whose gradients overflowed skips the step and lowers the scale instead of raising."""
        scaler = self.precision.scaler
        if scaler is not None:
            self.precision.unscale(self.optimizers[optimizer_name])
        grads = [p.grad for p in params if p.grad is not None]
        if grads:
            # Adding 0 * loss makes a non-finite loss show in the gradient norm, so the one check
            # below (on the norm clipping reads back anyway) covers both without another host sync.
            # In a LearnerGroup that norm is of the all-reduced gradients: every process agrees.
            grads[0].add_(loss.detach(), alpha=0.0)
        norm = _clip_gradients_fn()(params, self.config.grad_clip, self.config.grad_clip_by)
        if math.isfinite(norm):
            return norm
        if scaler is not None and is_finite(loss):
            self.precision.skip_overflow(self.optimizers[optimizer_name])
            for p in params:
                p.grad = None
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
        shown = {k: describe_value(v) for k, v in values.items()}
        bad = [f"{k}={shown[k]}" for k, v in values.items() if not is_finite(v)]
        if bad:
            what = f"a non-finite loss ({', '.join(bad)})"
        elif not is_finite(loss):
            what = f"a non-finite loss ({describe_value(loss)})"
        else:
            finite = ", ".join(f"{k}={v}" for k, v in shown.items())
            what = f"a non-finite gradient norm ({norm}) from a finite loss ({finite})"
        if getattr(_clip_gradients_fn(), "_rlx_grad_sync", False):  # installed by LearnerGroup processes
            what += (" (the gradients are averaged over the LearnerGroup's processes: another process's shard of "
                     "the batch may hold the NaN or inf)")
        when = f"at env step {self._update_timestep}, " if self._update_timestep is not None else ""
        lr = self.optimizers[optimizer_name].param_groups[0]["lr"]
        return (
            f"{type(self).__name__} (module {type(self.rl_module).__name__}, optimizer '{optimizer_name}') got "
            f"{what} {when}after {self.num_grad_updates} gradient updates. This optimizer step was not taken, "
            f"so the weights are as they were before it. {batch_hint(self._update_batch)}Check the learning "
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
        return self.rl_module.get_state()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load module weights."""
        self.rl_module.set_state(weights)

    def get_extra_state(self) -> dict[str, Any]:
        """Algorithm-specific learner state as JSON-safe values (e.g. PPO's KL coefficient)."""
        state: dict[str, Any] = {"num_grad_updates": self.num_grad_updates,
                                 "last_target_update": self._last_target_update,
                 "num_nonfinite_updates_skipped": self.num_nonfinite_updates_skipped}
        schedulers = {}
        for name, scheds in self._torch_lr_schedulers.items():
            states = [s.state_dict() for s in scheds]
            try:
                json.dumps(states)
            except (TypeError, ValueError):
                continue  # e.g. a LambdaLR's function: such a scheduler restarts after a restore
            schedulers[name] = states
        if schedulers:
            state["torch_lr_schedulers"] = schedulers
        if self.precision.scaler is not None:
            state["grad_scaler"] = self.precision.state_dict()
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore get_extra_state()."""
        self.num_grad_updates = int(state.get("num_grad_updates", 0))
        self._last_target_update = int(state.get("last_target_update", 0))
        self.num_nonfinite_updates_skipped = int(state.get("num_nonfinite_updates_skipped", 0))
        self.precision.load_state_dict(state.get("grad_scaler") or {})
        for name, states in (state.get("torch_lr_schedulers") or {}).items():
            scheds = self._torch_lr_schedulers.get(name, [])
            if len(scheds) == len(states):
                for scheduler, sched_state in zip(scheds, states):
                    scheduler.load_state_dict(sched_state)

    def get_extra_tensors(self) -> dict[str, torch.Tensor]:
        """Tensors outside the module to checkpoint (target networks, ...); none by default."""
        return {}

    def set_extra_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Restore get_extra_tensors()."""
        if tensors:
            raise ValueError(f"{type(self).__name__} keeps no extra tensors, got {sorted(tensors)[:5]}.")


def _model_with_custom_loss(module: Any) -> Any:
    """The old-API ModelV2 a module runs (its `model`, unwrapped from an LSTMWrapper) when that
    model overrides `custom_loss`; else None."""
    model = getattr(module, "model", None)
    inner = getattr(model, "wrapped", model)
    if isinstance(inner, ModelV2) and type(inner).custom_loss is not ModelV2.custom_loss:
        return model
    return None
