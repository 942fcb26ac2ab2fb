"""Learner helpers at RLlib's `ray.rllib.core.learner.utils`: target networks."""
from __future__ import annotations

from torch import nn

from rlx.core.learner.target_networks import make_target_network
from rlx.core.learner.target_networks import update_target_network as _update_target_network

__all__ = ["make_target_network", "update_target_network"]


def update_target_network(*, main_net: nn.Module, target_net: nn.Module, tau: float) -> None:
    """Move `target_net` towards `main_net`: target = tau * main + (1 - tau) * target (tau=1 copies)."""
    _update_target_network(target_net, main_net, tau)
