"""`torch_compile_worker`: EnvRunners act through torch.compile'd forward passes.

RLlib's settings choose it: `framework(torch_compile_worker=True,
torch_compile_worker_dynamo_backend="onnxrt", torch_compile_worker_dynamo_mode=None)`. Each
EnvRunner compiles the `forward_exploration` and `forward_inference` of the modules it acts
with (lazily, at the first step that needs one) and calls the compiled functions instead of
the eager ones; rlx's NumPy fast path for acting (rlx.core.numpy_forward) is then off, since
it would bypass the compiled module. The modules themselves are not changed: a Learner that
shares the local EnvRunner's module trains it as before, and weights, state dicts and
checkpoints are untouched.

RLlib's default backend, "onnxrt", exists only in torch versions that still register it and
only where onnxruntime is installed (torch 2.11 and 2.13 do not register it at all). Where it
is missing, the EnvRunners compile with "inductor" (torch's default) and log one warning
saying so, rather than fail on a setting most users never chose; any other backend this
torch does not know is refused when it is set. Inductor's first compile in a process takes
seconds on a quiet machine, up to a minute where its compiler toolchain starts cold.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from rlx.core.config_view import ResolvedConfig
from rlx.utils.errors import RLXError

logger = logging.getLogger("rlx")

__all__ = ["RLLIB_DEFAULT_BACKEND", "CompiledActing", "acting_forward", "check_worker_backend",
           "resolve_worker_backend"]

#: RLlib's default torch_compile_worker_dynamo_backend (off macOS).
RLLIB_DEFAULT_BACKEND = "onnxrt"
#: What an EnvRunner compiles with when "onnxrt" is not available here.
FALLBACK_BACKEND = "inductor"

_warned_fallback = False


def check_worker_backend(name: str, value: Any) -> Any:
    """Config check of `torch_compile_worker_dynamo_backend`: a callable backend, RLlib's default
    'onnxrt' (resolved when an EnvRunner compiles, see resolve_worker_backend), or a backend name
    torch.compile knows here."""
    if callable(value) or value == RLLIB_DEFAULT_BACKEND:
        return value
    from rlx.core.learner.compile import check_backend_option

    return check_backend_option(name, value)


def resolve_worker_backend(backend: Any) -> Any:
    """The backend EnvRunners compile with: `backend` itself, except 'onnxrt' where onnxruntime
    is missing, which becomes 'inductor' (with one warning per process)."""
    global _warned_fallback
    if backend != RLLIB_DEFAULT_BACKEND:
        return backend
    import torch._dynamo

    if RLLIB_DEFAULT_BACKEND in torch._dynamo.list_backends(exclude_tags=()):
        return backend
    if not _warned_fallback:
        _warned_fallback = True
        logger.warning("torch_compile_worker: the dynamo backend 'onnxrt' (RLlib's default "
                       "torch_compile_worker_dynamo_backend) is not available here (it needs onnxruntime and a "
                       "torch version that still has it); the EnvRunners compile with '%s' instead. Set "
                       "torch_compile_worker_dynamo_backend to choose another backend.", FALLBACK_BACKEND)
    return FALLBACK_BACKEND


class CompiledActing:
    """The compiled forward passes one EnvRunner acts with, per module and per explore flag.

    Args:
        backend: torch_compile_worker_dynamo_backend (a name or a callable backend).
        mode: torch_compile_worker_dynamo_mode (None: torch's default).
    """

    def __init__(self, backend: Any, mode: str | None = None):
        self.backend = resolve_worker_backend(backend)
        self.mode = mode
        # (module class, explore) -> [the class's compiled forward method, whether it has run once].
        # Compiled per class and called with the module as its first argument, so that no module is
        # kept alive here (multi-agent runners may drop and rebuild policies' modules).
        self._compiled: dict[tuple[type, bool], list[Any]] = {}

    @classmethod
    def from_config(cls, config: ResolvedConfig) -> "CompiledActing | None":
        """The CompiledActing of an EnvRunner with this config; None unless torch_compile_worker."""
        if not getattr(config, "torch_compile_worker", False):
            return None
        return cls(config.torch_compile_worker_dynamo_backend, config.torch_compile_worker_dynamo_mode)

    def forward(self, module: Any, explore: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The compiled `forward_exploration` (explore) or `forward_inference` of `module`."""
        key = (type(module), bool(explore))
        entry = self._compiled.get(key)
        if entry is None:
            import torch

            method = key[0].forward_exploration if explore else key[0].forward_inference
            entry = self._compiled[key] = [torch.compile(method, backend=self.backend, mode=self.mode), False]
        if entry[1]:
            return lambda batch: entry[0](module, batch)
        return lambda batch: self._first_call(entry, module, batch, explore)

    def _first_call(self, entry: list[Any], module: Any, batch: dict[str, Any], explore: bool) -> dict[str, Any]:
        """Run a compiled forward pass for the first time (when torch compiles it), naming the
        settings when compiling fails."""
        try:
            out = entry[0](module, batch)
        except Exception as err:
            what = "forward_exploration" if explore else "forward_inference"
            raise RLXError(
                f"torch_compile_worker: compiling {type(module).__name__}.{what} with "
                f"torch_compile_worker_dynamo_backend={self.backend!r} and torch_compile_worker_dynamo_mode="
                f"{self.mode!r} failed ({type(err).__name__}: {err}). Choose another backend or mode, or set "
                "torch_compile_worker=False.") from err
        entry[1] = True
        return out

    def clear(self) -> None:
        """Forget every compiled function (e.g. after the modules were replaced)."""
        self._compiled.clear()


def acting_forward(compiled: CompiledActing | None, module: Any, explore: bool) -> Callable[..., dict[str, Any]]:
    """The function an EnvRunner acts with: the module's eager forward_exploration (explore) or
    forward_inference, or their compiled form when the runner compiles (torch_compile_worker)."""
    if compiled is None:
        return module.forward_exploration if explore else module.forward_inference
    return compiled.forward(module, explore)
