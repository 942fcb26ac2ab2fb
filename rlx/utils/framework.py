"""RLlib's framework import helpers (`ray.rllib.utils.framework`). rlx is PyTorch-only."""
from __future__ import annotations

from typing import Any


def try_import_torch(error: bool = False) -> tuple[Any, Any]:
    """(torch, torch.nn)."""
    import torch
    from torch import nn

    return torch, nn


def try_import_tf(error: bool = False) -> tuple[None, None, None]:
    """(tf1, tf, tfv): rlx is PyTorch-only, so always (None, None, None) (an ImportError with
    `error=True`)."""
    if error:
        raise ImportError("rlx is PyTorch-only: TensorFlow is not supported; use framework('torch').")
    return None, None, None


def try_import_jax(error: bool = False) -> tuple[None, None]:
    """(jax, flax): rlx is PyTorch-only, so always (None, None) (an ImportError with `error=True`)."""
    if error:
        raise ImportError("rlx is PyTorch-only: JAX is not supported; use framework('torch').")
    return None, None


def get_device(config: Any, num_gpus_requested: int = 1) -> Any:
    """The torch device a Learner uses: CPU (rlx trains on the CPU)."""
    import torch

    return torch.device("cpu")
