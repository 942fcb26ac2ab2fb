"""`torch_compile_learner`: the Learner's networks, or its whole update, compiled with `torch.compile`.

RLlib's settings choose it: `framework(torch_compile_learner=True,
torch_compile_learner_dynamo_backend="inductor", torch_compile_learner_dynamo_mode=None,
torch_compile_learner_what_to_compile="forward_train")`.

- "forward_train": rlx compiles every network of the module the Learner trains (each child
  module that holds parameters, in place, so weights, state dicts and checkpoints keep their
  names); the losses and optimizer steps stay eager.
- "complete_update": rlx compiles the Learner's whole update, `update_from_batch` (forward
  passes, losses, backward passes and optimizer steps), as RLlib compiles its
  `_uncompiled_update`. The first update runs eagerly (so whatever an update creates lazily
  exists before tracing), every later one runs compiled. TorchDynamo splits the update into
  graphs where it reads values back to Python (gradient norms for clipping and the non-finite
  check, metrics), and runs that Python eagerly, so the weights are those of the eager update.

A compiling Learner trains its own copy of the module, so EnvRunners act with the eager one.
Which combinations can compile is decided when the Algorithm is built (`check_compile_settings`
in `AlgorithmConfig.validate()`, `check_learner_can_compile_update` when a Learner is made).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

# The config checks live in the core layer's light rlx.core.compile_options (re-exported here).
from rlx.core.compile_options import (COMPLETE_UPDATE_OPTION, WHAT_TO_COMPILE, check_backend, check_backend_option,
                                      check_compile_settings, compiles_complete_update)
from rlx.core.config_view import ResolvedConfig
from rlx.utils.errors import ConfigError

__all__ = ["WHAT_TO_COMPILE", "check_backend_option", "check_compile_settings", "check_learner_can_compile_update",
           "compile_learner_module", "compile_update", "compiled_networks", "compiles_complete_update"]


def check_learner_can_compile_update(learner: Any) -> None:
    """Raise ConfigError (at build, when the Learner is made) if `learner`'s class declares that its
    update cannot be compiled whole (`compile_complete_update = False`, with the reason in
    `compile_complete_update_reason`)."""
    if getattr(type(learner), "compile_complete_update", True):
        return
    reason = getattr(type(learner), "compile_complete_update_reason", "") or "its update cannot be traced"
    raise ConfigError(f"{COMPLETE_UPDATE_OPTION} is not available for {type(learner).__name__}: {reason}. Use "
                      "torch_compile_learner_what_to_compile='forward_train' to compile its networks instead.")


def compile_update(update: Callable[..., Any], config: ResolvedConfig) -> Callable[..., Any]:
    """`update` (a Learner's bound `update_from_batch`) compiled with the config's backend and mode.

    A part of the update that TorchDynamo or the backend fails to compile runs eagerly (with a
    warning from torch) instead of stopping training: compile errors come before the part runs,
    so nothing is applied twice."""
    import torch._dynamo

    backend = config.torch_compile_learner_dynamo_backend or "inductor"
    check_backend(backend)
    compiled = torch.compile(update, backend=backend, mode=config.torch_compile_learner_dynamo_mode)

    def compiled_update(*args: Any, **kwargs: Any) -> Any:
        with torch._dynamo.config.patch(suppress_errors=True):
            return compiled(*args, **kwargs)

    return compiled_update


def compile_learner_module(module: torch.nn.Module, config: ResolvedConfig) -> list[str]:
    """Compile the networks of `module` as `config`'s torch_compile_learner_* settings say
    (what_to_compile='forward_train'); return the names of the compiled children."""
    backend = config.torch_compile_learner_dynamo_backend or "inductor"
    check_backend(backend)
    mode = config.torch_compile_learner_dynamo_mode
    compiled = []
    for name, child in module.named_children():
        if any(True for _ in child.parameters()):
            child.compile(backend=backend, mode=mode)
            compiled.append(name)
    return compiled


def compiled_networks(module: torch.nn.Module) -> list[str]:
    """Names of the children of `module` that run compiled."""
    return [name for name, child in module.named_children() if getattr(child, "_compiled_call_impl", None)]
