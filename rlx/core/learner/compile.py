"""`torch_compile_learner`: the Learner's networks compiled with `torch.compile`.

RLlib's settings choose it: `framework(torch_compile_learner=True,
torch_compile_learner_dynamo_backend="inductor", torch_compile_learner_dynamo_mode=None,
torch_compile_learner_what_to_compile="forward_train")`. rlx compiles every network of the
module the Learner trains (each child module that holds parameters, in place, so weights,
state dicts and checkpoints keep their names); the losses and optimizer steps stay eager.
A compiling Learner trains its own copy of the module, so EnvRunners act with the eager one.
"""
from __future__ import annotations

from typing import Any

import torch

from rlx.utils.errors import ConfigError, NotSupportedYetError, did_you_mean

__all__ = ["WHAT_TO_COMPILE", "check_backend_option", "compile_learner_module", "compiled_networks"]

#: RLlib's `torch_compile_learner_what_to_compile` values.
WHAT_TO_COMPILE = ("forward_train", "complete_update")


def compile_learner_module(module: torch.nn.Module, config: Any) -> list[str]:
    """Compile the networks of `module` as `config`'s torch_compile_learner_* settings say; return
    the names of the compiled children."""
    what = _what_to_compile(config.torch_compile_learner_what_to_compile)
    if what == "complete_update":
        raise NotSupportedYetError(
            "torch_compile_learner_what_to_compile='complete_update'",
            "rlx compiles the networks (forward passes); its losses and optimizer steps stay eager",
            fix="Use torch_compile_learner_what_to_compile='forward_train' (the default).")
    backend = config.torch_compile_learner_dynamo_backend or "inductor"
    _check_backend(backend)
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


def _what_to_compile(value: Any) -> str:
    text = str(getattr(value, "value", value))
    if text not in WHAT_TO_COMPILE:
        raise ConfigError(f"torch_compile_learner_what_to_compile={value!r} is not one of {list(WHAT_TO_COMPILE)}."
                          f"{did_you_mean(text, WHAT_TO_COMPILE)}")
    return text


#: Backends every torch build registers: accepted without importing torch._dynamo (a second).
_COMMON_BACKENDS = frozenset({"inductor", "eager", "aot_eager", "cudagraphs"})


def check_backend_option(name: str, value: Any) -> Any:
    """Config check of `torch_compile_learner_dynamo_backend`: a callable or a backend name
    torch.compile knows here."""
    if callable(value):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"'{name}' must be a torch.compile backend name (e.g. 'inductor') or a callable backend, "
                          f"got {value!r}.")
    _check_backend(value, name)
    return value


def _check_backend(backend: Any, name: str = "torch_compile_learner_dynamo_backend") -> None:
    if callable(backend) or backend in _COMMON_BACKENDS:
        return
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if backend not in known:
        raise ConfigError(f"{name}={backend!r} is not a torch.compile backend here."
                          f"{did_you_mean(str(backend), known)} Backends: {sorted(known)}.")
