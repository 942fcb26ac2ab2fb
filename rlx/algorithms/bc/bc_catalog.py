"""BCCatalog (RLlib's `ray.rllib.algorithms.bc.bc_catalog`): the catalog of a behavior-cloning
module, an encoder (`build_encoder`, from the Catalog base) and a policy head (`build_pi_head`);
BC has no value function. Pass it, or a subclass, as `RLModuleSpec(catalog_class=BCCatalog)`.
"""
from __future__ import annotations

from torch import nn

from rlx.core.catalog import Catalog, check_framework
from rlx.core.distributions import dist_class_for_space
from rlx.core.mlp import make_mlp

__all__ = ["BCCatalog"]


class BCCatalog(Catalog):
    """Encoder plus policy head. The head is an MLP of `head_fcnet_hiddens` (default: none) with
    `head_fcnet_activation` on the encoder's `latent_dims`, ending in the action distribution's
    inputs (`pi_head_output_dim`)."""

    def _determine_components_hook(self) -> None:
        super()._determine_components_hook()
        dist_cls, _ = dist_class_for_space(self.action_space, self._model_config_dict)
        #: The width of the action-distribution inputs the policy head outputs.
        self.pi_head_output_dim = int(dist_cls.required_input_dim(self.action_space, self._model_config_dict))

    def build_pi_head(self, framework: str = "torch") -> nn.Module:
        """The policy head: encoder features (`latent_dims`) -> action-distribution inputs."""
        check_framework(framework)
        cfg = self._model_config_dict
        hiddens = list(cfg.get("head_fcnet_hiddens") or [])
        activation = cfg.get("head_fcnet_activation", "relu")
        return make_mlp(int(self.latent_dims[0]), hiddens, activation, self.pi_head_output_dim)
