"""Adam, AdamW and SGD written with torch's multi-tensor (foreach) kernels; Adam and AdamW
step dense CPU and CUDA tensors with torch's fused kernel (`torch._fused_adam_`).

Why not torch.optim: the first use of any torch.optim optimizer imports torch._dynamo,
which costs about a second of start-up, and for the small models of RL its default Adam
step is about twice as slow as this one. The math is the textbook one (Kingma & Ba;
Loshchilov & Hutter for AdamW); state_dict() uses torch.optim's layout, so checkpoints
treat both alike. Other optimizer types fall back to torch.optim.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import torch

from rlx.utils.errors import ConfigError

#: A list of tensors as torch's foreach ops take and return it.
TensorList = list[torch.Tensor] | tuple[torch.Tensor, ...]


class _ForeachOptimizer:
    """Shared parts: one param group, torch.optim-style param_groups/state_dict."""

    _state_names: tuple[str, ...] = ()

    def __init__(self, params: Iterable[torch.nn.Parameter], defaults: dict[str, Any]):
        self.params = [p for p in params]
        self.param_groups = [dict(defaults, params=self.params)]
        self.state_tensors = {name: [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
                              for name in self._state_names}
        self.step_count = 0

    @property
    def group(self) -> dict[str, Any]:
        """The (single) parameter group with the hyperparameters."""
        return self.param_groups[0]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def _grads(self) -> tuple[list[torch.Tensor], TensorList, dict[str, list[torch.Tensor]]]:
        params: list[torch.Tensor] = []
        grads: list[torch.Tensor] = []
        idx: list[int] = []
        for i, p in enumerate(self.params):
            if p.grad is not None:
                params.append(p)
                grads.append(p.grad)
                idx.append(i)
        state = {k: [v[i] for i in idx] for k, v in self.state_tensors.items()}
        return params, grads, state

    def state_dict(self) -> dict[str, Any]:
        """torch.optim-compatible state dict."""
        state = {}
        for i in range(len(self.params)):
            entry: dict[str, Any] = {"step": torch.tensor(float(self.step_count))}
            for name, tensors in self.state_tensors.items():
                entry[name] = tensors[i].clone()
            state[i] = entry
        group = {k: v for k, v in self.group.items() if k != "params"}
        group["params"] = list(range(len(self.params)))
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore from state_dict()."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"Optimizer state holds {sum(len(g['params']) for g in groups)} parameters, "
                f"this optimizer has {len(self.params)}."
            )
        for k, v in groups[0].items():
            if k != "params":
                self.group[k] = tuple(v) if k == "betas" else v
        steps = 0
        for i in range(len(self.params)):
            entry = state_dict["state"].get(i, state_dict["state"].get(str(i), {}))
            for name in self.state_tensors:
                if name in entry:
                    t = torch.as_tensor(entry[name])
                    if t.shape != self.params[i].shape:
                        raise ValueError(f"Optimizer state '{name}' of parameter {i} has shape {tuple(t.shape)}, "
                                         f"expected {tuple(self.params[i].shape)}.")
                    self.state_tensors[name][i].copy_(t)
            if "step" in entry:
                steps = int(float(entry["step"]))
        self.step_count = steps


class Adam(_ForeachOptimizer):
    """Adam (weight_decay adds L2 to the gradient) and, with `decoupled=True`, AdamW."""

    _state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled: bool = False):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "decoupled": decoupled})

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        params, grads, state = self._grads()
        if not params:
            return
        g = self.group
        lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
        self.step_count += 1
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        # Traced by torch.compile (torch_compile_learner_what_to_compile='complete_update'), the foreach
        # ops below: AOT autograd cannot functionalize the fused kernel's in-place update.
        if _fusable(params, grads) and not torch.compiler.is_compiling():
            # One kernel for every tensor (torch's fused Adam/AdamW, the same math as below):
            # on the CPU the foreach ops loop over the tensors op by op, about 4x as slow for
            # SAC's critics.
            step = self._step_tensor(params[0].device)
            fused = torch._fused_adamw_ if g["decoupled"] else torch._fused_adam_
            fused(params, grads, exp_avg, exp_avg_sq, [], [step] * len(params), lr=lr, beta1=b1, beta2=b2,
                  weight_decay=wd, eps=eps, amsgrad=False, maximize=False)
            return
        if wd:
            if g["decoupled"]:
                torch._foreach_mul_(params, 1.0 - lr * wd)
            else:
                grads = torch._foreach_add(grads, params, alpha=wd)
        torch._foreach_lerp_(exp_avg, grads, 1.0 - b1)
        torch._foreach_mul_(exp_avg_sq, b2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1.0 - b2)
        bias1 = 1.0 - b1**self.step_count
        bias2 = 1.0 - b2**self.step_count
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, math.sqrt(bias2))
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, exp_avg, denom, value=-lr / bias1)

    def _step_tensor(self, device: torch.device) -> torch.Tensor:
        """The step count as the float tensor on `device` that torch's fused kernels read."""
        step = getattr(self, "_step", None)
        if step is None or step.device != device:
            step = self._step = torch.zeros((), dtype=torch.float32, device=device)
        step.fill_(float(self.step_count))
        return step


_FUSED_DEVICES = ("cpu", "cuda")
_FUSED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _fusable(params: list[torch.Tensor], grads: TensorList) -> bool:
    """Whether torch's fused Adam kernel can step these tensors: dense, one CPU or CUDA device,
    floating dtypes matching their gradients."""
    if not hasattr(torch, "_fused_adam_"):
        return False
    device, dtype = params[0].device, params[0].dtype
    if device.type not in _FUSED_DEVICES or dtype not in _FUSED_DTYPES:
        return False
    return all(p.device == device and g.dtype == p.dtype and not g.is_sparse and g.device == device
               for p, g in zip(params, grads))


class SGD(_ForeachOptimizer):
    """SGD with optional momentum (Nesterov or not) and L2 weight decay."""

    _state_names = ("momentum_buffer",)

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 1e-2, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov})

    @torch.no_grad()
    def step(self) -> None:
        """One SGD update of every parameter that has a gradient."""
        params, grads, state = self._grads()
        if not params:
            return
        g = self.group
        self.step_count += 1
        if g["weight_decay"]:
            grads = torch._foreach_add(grads, params, alpha=g["weight_decay"])
        if g["momentum"]:
            buf = state["momentum_buffer"]
            if self.step_count == 1:
                torch._foreach_copy_(buf, grads)
            else:
                torch._foreach_mul_(buf, g["momentum"])
                torch._foreach_add_(buf, grads)
            grads = torch._foreach_add(grads, buf, alpha=g["momentum"]) if g["nesterov"] else buf
        torch._foreach_add_(params, grads, alpha=-g["lr"])


#: Ranges of the optimizer keyword arguments rlx checks before building: (low, high, low
#: is allowed). Other numeric arguments must be finite.
_OPTION_RANGES: dict[str, tuple[float, float, bool]] = {
    "momentum": (0.0, math.inf, True),
    "dampening": (0.0, math.inf, True),
    "weight_decay": (0.0, math.inf, True),
    "eps": (0.0, math.inf, False),
    "alpha": (0.0, math.inf, True),
    "rho": (0.0, 1.0, True),
    "lr_decay": (0.0, math.inf, True),
    "initial_accumulator_value": (0.0, math.inf, True),
}


def check_optimizer_options(optimizer: str, options: dict[str, Any]) -> None:
    """Raise a ConfigError naming the key when an optimizer setting is out of range: NaN or
    infinite numbers, negative momentum/weight_decay, eps <= 0, betas outside [0, 1)."""
    for key, value in options.items():
        if key == "betas":
            ok = isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(b, (int, float)) and not isinstance(b, bool) and 0.0 <= b < 1.0 for b in value)
            if not ok:
                raise ConfigError(f"optimizer option 'betas' of the {optimizer} optimizer must be two numbers in "
                                  f"[0, 1), got {value!r}.")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):
            raise ConfigError(f"optimizer option '{key}' of the {optimizer} optimizer must be finite, got {value}.")
        low, high, low_ok = _OPTION_RANGES.get(key, (-math.inf, math.inf, True))
        if value < low or (value == low and not low_ok) or value > high:
            bound = f">= {low:g}" if low_ok else f"> {low:g}"
            raise ConfigError(f"optimizer option '{key}' of the {optimizer} optimizer must be {bound}"
                              f"{'' if high == math.inf else f' and <= {high:g}'}, got {value}.")
