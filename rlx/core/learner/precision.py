"""Mixed precision for Learners: networks under `torch.autocast`, loss scaling for float16.

Two settings choose it:
- `learners(mixed_precision="bf16" | "fp16")` (rlx): during every update, each network of the
  Learner (every module holding parameters, outermost call only) runs under `torch.autocast` on
  the Learner's device type with that dtype, and its floating outputs come back as float32. The
  losses, distributions, TD targets and backward passes stay float32: on the CPU, autocast would
  otherwise run log-softmax and friends in half precision, and PPO's probability ratios drift.
  Weights and optimizer state stay float32. EnvRunners acting with the same module are not
  affected (the networks autocast only inside `Learner.run_update`, in its thread).
- `experimental(_torch_grad_scaler_class=torch.amp.GradScaler)` (RLlib's): losses are scaled
  before backward and gradients unscaled before clipping; a step whose gradients overflowed is
  skipped and the scale lowered. "fp16" without a scaler class gets torch's GradScaler, since
  float16 gradients underflow without one; "bf16" needs none (it has float32's range).

One scaler serves all of a Learner's optimizers: each optimizer's gradients are unscaled before
its step and the scale is updated once all optimizers of a loss have stepped.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Iterator, Sequence

import torch

from rlx.core.config_view import ResolvedConfig
from rlx.utils.errors import ConfigError
from rlx.utils.progress_events import report_updates

__all__ = ["MIXED_PRECISION_DTYPES", "Precision", "cpu_has_native_bf16"]

logger = logging.getLogger("rlx")

#: The accepted `mixed_precision` values and the autocast dtypes they name.
MIXED_PRECISION_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Precision:
    """A Learner's autocast dtype (or none) and its loss scaler (or none), from the config."""

    def __init__(self, config: ResolvedConfig, device: torch.device):
        name = getattr(config, "mixed_precision", None)
        self.device_type = device.type
        self.dtype: torch.dtype | None = MIXED_PRECISION_DTYPES[name] if name else None
        if self.dtype is torch.float16 and self.device_type == "cpu" and not _cpu_supports_fp16_autocast():
            raise ConfigError("mixed_precision='fp16' on a CPU Learner needs a torch whose CPU autocast supports "
                              "float16; use mixed_precision='bf16' on the CPU.")
        if self.dtype is torch.bfloat16 and self.device_type == "cpu":
            _warn_once_without_native_bf16()
        scaler_class = getattr(config, "_torch_grad_scaler_class", None)
        if scaler_class is None and self.dtype is torch.float16:
            scaler_class = torch.amp.GradScaler
        self.scaler: Any = _build_scaler(scaler_class, self.device_type) if scaler_class is not None else None
        #: Optimizer steps skipped because the scaled gradients overflowed (the scale was lowered).
        self.num_overflow_skips = 0

    @property
    def active(self) -> bool:
        """Whether anything differs from plain float32 updates."""
        return self.dtype is not None or self.scaler is not None

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The context every update runs in: the attached networks autocast inside it (in this
        thread), or nothing changes without a mixed-precision dtype."""
        if self.dtype is None:
            yield
            return
        state = self._state
        state.active = True
        try:
            yield
        finally:
            state.active = False
            state.depth = 0
            while state.entered:  # a network's forward raised: leave its autocast region
                state.entered.pop().__exit__(None, None, None)

    def attach(self, *modules: torch.nn.Module) -> None:
        """Let the networks of `modules` autocast during updates (no-op without a dtype). Every
        submodule holding parameters gets hooks; the outermost one called opens the region."""
        if self.dtype is None:
            return
        for module in modules:
            for sub in module.modules():
                if getattr(sub, "_rlx_autocast_hooks", False) or not any(True for _ in sub.parameters()):
                    continue
                sub.register_forward_pre_hook(self._enter)
                sub.register_forward_hook(self._leave)
                setattr(sub, "_rlx_autocast_hooks", True)  # a flag, not a tensor or submodule

    @property
    def _state(self) -> threading.local:
        state = self.__dict__.get("_thread_state")
        if state is None:
            state = self.__dict__["_thread_state"] = threading.local()
        if not hasattr(state, "active"):
            state.active, state.depth, state.entered = False, 0, []
        return state

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        state = self._state
        if not state.active:
            return
        state.depth += 1
        if state.depth == 1:
            region = torch.autocast(device_type=self.device_type, dtype=self.dtype)
            region.__enter__()
            state.entered.append(region)

    def _leave(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        state = self._state
        if not state.active or state.depth == 0:
            return None
        state.depth -= 1
        if state.depth > 0:
            return None
        state.entered.pop().__exit__(None, None, None)
        return _to_float32(output)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_thread_state"}

    def __deepcopy__(self, memo: dict) -> "Precision":
        return self  # module copies (target networks) share their Learner's precision

    def backward(self, loss: torch.Tensor) -> None:
        """`loss.backward()`, scaled when a scaler is set, with autocast off."""
        with self._no_autocast():
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def grad(self, loss: torch.Tensor, params: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """`torch.autograd.grad(loss, params)`, of the scaled loss when a scaler is set (unscale
        them with `unscale` before reading them)."""
        with self._no_autocast():
            return torch.autograd.grad(self.scaler.scale(loss) if self.scaler is not None else loss, params)

    def unscale(self, optimizer: Any) -> None:
        """Divide the gradients of `optimizer`'s parameters by the loss scale (no-op without a scaler)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: Any) -> None:
        """Step `optimizer` (through the scaler when there is one)."""
        if self.scaler is not None:
            self.scaler.step(optimizer)
        else:
            optimizer.step()

    def skip_overflow(self, optimizer: Any) -> None:
        """Record a skipped step of `optimizer` whose unscaled gradients overflowed (the scaler
        then lowers the scale at `update`)."""
        self.num_overflow_skips += 1
        self.scaler.step(optimizer)  # sees the recorded inf and does not step

    def update(self) -> None:
        """Adjust the loss scale after the optimizers of one loss stepped (or skipped)."""
        if self.scaler is not None:
            self.scaler.update()
        report_updates(1)  # one gradient update done: to a progress display (rlx.utils.progress_events)

    def metrics(self) -> dict[str, float]:
        """RLlib's `_torch_grad_scaler_current_scale` and rlx's overflow-skip count, with a scaler."""
        if self.scaler is None:
            return {}
        return {"_torch_grad_scaler_current_scale": float(self.scaler.get_scale()),
                "num_loss_scale_overflow_skips": self.num_overflow_skips}

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state (scale and growth tracker), JSON-safe; empty without a scaler."""
        if self.scaler is None:
            return {}
        return {key: (float(value) if isinstance(value, (int, float)) else value)
                for key, value in self.scaler.state_dict().items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` (ignored without a scaler)."""
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)

    def _no_autocast(self) -> Any:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, enabled=False)


def _to_float32(value: Any) -> Any:
    """`value` with its float16/bfloat16 tensors (also inside tuples, lists and dicts) as float32."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype in (torch.float16, torch.bfloat16) else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_to_float32(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_to_float32(v) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _to_float32(v)) for k, v in value.items())
    return value


def _build_scaler(scaler_class: Any, device_type: str) -> Any:
    """An instance of `scaler_class` for `device_type` (torch.amp.GradScaler takes the device
    first; other classes are called as RLlib calls them, without arguments)."""
    if scaler_class is torch.amp.GradScaler:
        return torch.amp.GradScaler(device_type)
    if isinstance(scaler_class, type) and issubclass(scaler_class, torch.amp.GradScaler):
        try:
            return scaler_class(device=device_type)
        except TypeError:  # torch.cuda.amp.GradScaler and others without a device argument
            return scaler_class()
    return scaler_class()


_warned_bf16 = False


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matrix products natively (AVX512-BF16 or AMX, as oneDNN
    reports); without it torch emulates them, many times slower than float32."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _warn_once_without_native_bf16() -> None:
    global _warned_bf16
    if _warned_bf16 or cpu_has_native_bf16():
        return
    _warned_bf16 = True
    logger.warning("mixed_precision='bf16' on a CPU Learner: this CPU has no native bfloat16 (AVX512-BF16 or AMX), "
                   "so torch emulates it and updates run many times slower than in float32 (17x for SAC's 256-unit "
                   "networks measured on an AVX2 CPU). Leave mixed_precision unset on this machine, or use a GPU "
                   "or a CPU with bfloat16 units.")


def _cpu_supports_fp16_autocast() -> bool:
    try:
        with torch.autocast(device_type="cpu", dtype=torch.float16):
            return bool(torch.is_autocast_enabled("cpu"))
    except (RuntimeError, TypeError):
        return False
