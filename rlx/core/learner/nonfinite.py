"""How a Learner describes a non-finite loss or gradient norm: whether a value is finite, the value
as the error prints it, and which columns of the training batch hold NaN or infinite values."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

__all__ = ["batch_hint", "describe_value", "is_finite"]


def is_finite(value: Any) -> bool:
    """Whether every entry of `value` (a tensor, an array or a number) is finite."""
    if isinstance(value, torch.Tensor):
        return bool(torch.isfinite(value).all())
    return bool(np.all(np.isfinite(value)))


def describe_value(value: Any) -> str:
    """`value` as an error message shows it: the number, or a tensor's shape."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return f"{float(value):.4g}" if value.numel() == 1 else f"tensor of shape {tuple(value.shape)}"
    return f"{float(value):.4g}"


def batch_hint(batch: Mapping[str, Any] | None) -> str:
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
