"""DefaultBCTorchRLModule (RLlib's `ray.rllib.algorithms.bc.torch.default_bc_torch_rl_module`): a
behavior-cloning module of an encoder and a policy head, both from its catalog (BCCatalog by
default; `RLModuleSpec(catalog_class=...)` to change them). It outputs action-distribution
inputs only: BC has no value function.
"""
from __future__ import annotations

from typing import Any

import torch

from rlx.algorithms.bc.bc_catalog import BCCatalog
from rlx.core.columns import Columns
from rlx.core.rl_module.torch import TorchRLModule


class DefaultBCTorchRLModule(TorchRLModule):
    """obs -> encoder -> pi head -> ACTION_DIST_INPUTS (one forward for acting and training)."""

    #: The networks come from `self.catalog_class` (default: BCCatalog).
    builds_from_catalog = True

    def setup(self) -> None:
        """Build the encoder and the policy head from the catalog."""
        obs_space, action_space = self._spaces()
        self.catalog = (self.catalog_class or BCCatalog)(obs_space, action_space, self.model_config)
        self.encoder = self.catalog.build_encoder(framework="torch")
        self.pi = self.catalog.build_pi_head(framework="torch")

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)
        return {Columns.ACTION_DIST_INPUTS: self.pi(self.encoder(obs))}
