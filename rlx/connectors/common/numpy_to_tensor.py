"""NumpyToTensor and TensorToNumpy: convert a batch's arrays to torch tensors and back."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.connectors.connector_v2 import ConnectorV2


def _map(value: Any, fn: Any) -> Any:
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float)):
        return type(value)(_map(v, fn) for v in value)
    return fn(value)


class NumpyToTensor(ConnectorV2):
    """Converts every NumPy array in the batch (nested dicts included) to a torch tensor.

    Args:
        device: the torch device to put the tensors on (default: CPU).
        pin_memory: pin host memory (for faster GPU copies).
        as_learner_connector: accepted for RLlib compatibility (same behaviour either way).
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, *,
                 device: Any = None, pin_memory: bool = False, as_learner_connector: bool = False,
                 **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._device = device
        self._pin_memory = bool(pin_memory)

    def _convert(self, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.dtype != object:
            tensor = torch.from_numpy(np.ascontiguousarray(value))
            if self._pin_memory and torch.cuda.is_available():
                tensor = tensor.pin_memory()
            return tensor.to(self._device) if self._device is not None else tensor
        return value

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        return _map(batch, self._convert)


class TensorToNumpy(ConnectorV2):
    """Converts every torch tensor in the batch (nested dicts included) to a NumPy array."""

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list[Any],
                 explore: bool | None = None, shared_data: dict | None = None, **kwargs: Any) -> Any:
        return _map(batch, lambda v: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v)
