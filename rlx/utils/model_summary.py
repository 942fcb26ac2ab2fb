"""A Keras-style layer table of a torch model: `policy.model.base_model.summary()`.

Each row is one leaf layer (a module without children, or one holding parameters of its own):
its dotted name, type, output shape and parameter count. Output shapes come from one forward
pass on an example input of batch size 1 (shown with `None` as the batch axis, as Keras prints
them); when no example can be run (a recurrent model, an observation space with no sample),
the shapes are shown as "?" and the counts are still exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

__all__ = ["LayerRow", "ModelSummary", "summarize"]


@dataclass
class LayerRow:
    """One line of the table: a leaf layer's name, type, output shape and parameter count."""

    name: str
    layer_type: str
    output_shape: str
    num_params: int


@dataclass
class ModelSummary:
    """The table of a model's layers and its parameter totals."""

    title: str
    rows: list[LayerRow] = field(default_factory=list)
    total_params: int = 0
    trainable_params: int = 0

    @property
    def non_trainable_params(self) -> int:
        """Parameters that do not require gradients (frozen layers)."""
        return self.total_params - self.trainable_params

    def __str__(self) -> str:
        headers = ("Layer (type)", "Output Shape", "Param #")
        cells = [(f"{r.name} ({r.layer_type})", r.output_shape, f"{r.num_params:,}") for r in self.rows]
        widths = [max([len(h)] + [len(c[i]) for c in cells]) + 2 for i, h in enumerate(headers)]
        rule = "_" * sum(widths)

        def line(values: tuple[str, str, str]) -> str:
            return "".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

        out = [f'Model: "{self.title}"', rule, line(headers), "=" * sum(widths)]
        for c in cells:
            out += [line(c), rule]
        out += [f"Total params: {self.total_params:,}",
                f"Trainable params: {self.trainable_params:,}",
                f"Non-trainable params: {self.non_trainable_params:,}"]
        return "\n".join(out)


def _shape_text(output: Any) -> str:
    """Shapes of a layer's output with the batch axis as None; tuples and dicts listed."""
    if isinstance(output, torch.Tensor):
        return str((None,) + tuple(output.shape[1:])) if output.dim() else "()"
    if isinstance(output, (tuple, list)):
        return "[" + ", ".join(_shape_text(o) for o in output) + "]"
    if isinstance(output, dict):
        return "{" + ", ".join(f"{k}: {_shape_text(v)}" for k, v in output.items()) + "}"
    return "?"


def _static_shape(module: nn.Module) -> str:
    """The output shape a layer has whatever its input (Linear layers run through F.linear in
    rlx's fast MLPs, so forward hooks do not see them); "?" for others."""
    if isinstance(module, nn.Linear):
        return str((None, module.out_features))
    return "?"


def _leaves(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Layers to list: modules without children, and containers with parameters of their own."""
    leaves = []
    for name, module in model.named_modules():
        if module is model:
            continue
        own_params = any(True for _ in module.parameters(recurse=False))
        if not any(True for _ in module.children()) or own_params:
            leaves.append((name, module))
    return leaves


def summarize(model: nn.Module, run_example: Callable[[], Any] | None = None, title: str | None = None) -> ModelSummary:
    """The layer table of `model`; `run_example` (optional) runs one forward pass on an example
    input so that each layer's output shape is recorded."""
    leaves = _leaves(model)
    shapes: dict[str, str] = {}
    if run_example is not None:
        def recorder(name: str) -> Callable[..., None]:
            def hook(module: nn.Module, inputs: Any, output: Any) -> None:  # returns None: output unchanged
                shapes.setdefault(name, _shape_text(output))
            return hook

        hooks = [module.register_forward_hook(recorder(name)) for name, module in leaves]
        was_training = model.training
        try:
            model.eval()
            with torch.no_grad():
                run_example()
        except Exception:  # noqa: BLE001 - shapes are optional; the counts below are exact either way
            shapes.clear()
        finally:
            model.train(was_training)
            for hook in hooks:
                hook.remove()
    rows = [LayerRow(name, type(module).__name__, shapes.get(name) or _static_shape(module),
                     sum(p.numel() for p in module.parameters(recurse=False)))
            for name, module in leaves]
    params = list(model.parameters())
    return ModelSummary(title=title or type(model).__name__, rows=rows,
                        total_params=sum(p.numel() for p in params),
                        trainable_params=sum(p.numel() for p in params if p.requires_grad))
