"""The checks of the `torch_compile_learner_*` settings, light enough for the config layer (torch
is imported only to look up an unusual backend name); compiling itself is rlx.core.learner.compile."""
from __future__ import annotations

from typing import Any

from rlx.core.config_view import ResolvedConfig
from rlx.utils.errors import ConfigError, did_you_mean

__all__ = ["COMMON_BACKENDS", "COMPLETE_UPDATE_OPTION", "WHAT_TO_COMPILE", "check_backend", "check_backend_option",
           "check_compile_settings", "compiles_complete_update", "what_to_compile"]

#: RLlib's `torch_compile_learner_what_to_compile` values.
WHAT_TO_COMPILE = ("forward_train", "complete_update")
#: The setting that compiles a whole update, as error messages name it.
COMPLETE_UPDATE_OPTION = "torch_compile_learner_what_to_compile='complete_update'"


def compiles_complete_update(config: ResolvedConfig) -> bool:
    """Whether `config` asks for the Learner's whole update to be compiled."""
    return bool(getattr(config, "torch_compile_learner", False)) and \
        what_to_compile(getattr(config, "torch_compile_learner_what_to_compile", "forward_train")) == "complete_update"


def check_compile_settings(config: ResolvedConfig) -> None:
    """Build-time check of the torch_compile_learner settings that depend on other options."""
    if compiles_complete_update(config) and int(getattr(config, "num_learners", 0) or 0) > 0:
        raise ConfigError(
            f"{COMPLETE_UPDATE_OPTION} cannot be combined with num_learners={config.num_learners}: learner processes "
            "average their gradients inside the update, which rlx does not compile (RLlib refuses torch.compile with "
            "distributed learners too). Use num_learners=0, or torch_compile_learner_what_to_compile="
            "'forward_train' to compile the networks only.")


def what_to_compile(value: Any) -> str:
    """`torch_compile_learner_what_to_compile` checked: "forward_train" or "complete_update"."""
    text = str(getattr(value, "value", value))
    if text not in WHAT_TO_COMPILE:
        raise ConfigError(f"torch_compile_learner_what_to_compile={value!r} is not one of {list(WHAT_TO_COMPILE)}."
                          f"{did_you_mean(text, WHAT_TO_COMPILE)}")
    return text


#: Backends every torch build registers: accepted without importing torch._dynamo (a second).
COMMON_BACKENDS = frozenset({"inductor", "eager", "aot_eager", "cudagraphs"})


def check_backend_option(name: str, value: Any) -> Any:
    """Config check of `torch_compile_learner_dynamo_backend`: a callable or a backend name
    torch.compile knows here."""
    if callable(value):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"'{name}' must be a torch.compile backend name (e.g. 'inductor') or a callable backend, "
                          f"got {value!r}.")
    check_backend(value, name)
    return value


def check_backend(backend: Any, name: str = "torch_compile_learner_dynamo_backend") -> None:
    """ConfigError unless `backend` is a callable or a torch.compile backend known here (torch._dynamo is
    imported only for a name outside the backends every torch build has)."""
    if callable(backend) or backend in COMMON_BACKENDS:
        return
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if backend not in known:
        raise ConfigError(f"{name}={backend!r} is not a torch.compile backend here."
                          f"{did_you_mean(str(backend), known)} Backends: {sorted(known)}.")
