"""Target networks: frozen copies of a module's networks that follow the online ones by Polyak
averaging (DQN, DDPG, TD3, SAC, APPO)."""
from __future__ import annotations

import copy
from typing import TypeVar

import torch

__all__ = ["make_target_network", "update_target_network"]


def update_target_network(target: torch.nn.Module, online: torch.nn.Module, tau: float) -> None:
    """target <- tau * online + (1 - tau) * target, over parameters and buffers (tau=1 copies)."""
    with torch.no_grad():
        t_params = list(target.parameters()) + [b for b in target.buffers() if b.dtype.is_floating_point]
        o_params = list(online.parameters()) + [b for b in online.buffers() if b.dtype.is_floating_point]
        if tau >= 1.0:
            torch._foreach_copy_(t_params, o_params)
        else:
            torch._foreach_lerp_(t_params, o_params, tau)


_ModuleT = TypeVar("_ModuleT", bound=torch.nn.Module)


def make_target_network(online: _ModuleT) -> _ModuleT:
    """A frozen copy of `online` for computing TD targets."""
    target = copy.deepcopy(online)
    target.requires_grad_(False)
    return target
