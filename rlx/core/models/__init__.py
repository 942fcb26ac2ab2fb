"""Default networks: MLP trunks (rlx.core.mlp) and the actor-critic RLModule built from
`model_config`."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.core.action_masking import apply_action_mask, find_action_mask
from rlx.core.cnn import is_image_space
from rlx.core.columns import Columns
from rlx.core.models.actor_critic_catalog import ActorCriticCatalog
from rlx.core.mlp import MLP, EnsembleMLP, flat_obs_dim, make_mlp, resolve_initializer
from rlx.core.numpy_forward import as_float32_rows, keeps_methods, mlp_numpy_fn
from rlx.core.rl_module.rl_module import RLModule, built_layer
from rlx.utils.errors import NotSupportedYetError

__all__ = ["ActorCriticModule", "EnsembleMLP", "MLP", "flat_obs_dim", "make_mlp", "refuse_no_final_linear",
           "resolve_initializer"]


def refuse_no_final_linear(model_config: dict[str, Any], algorithm: str) -> None:
    """NotSupportedYetError for model['no_final_linear'] in a module whose heads need their linear layer."""
    if model_config.get("no_final_linear"):
        raise NotSupportedYetError(f"model['no_final_linear'] with {algorithm}",
                                   "it applies to the actor-critic network of policy-gradient algorithms (PPO, ...)",
                                   fix="Remove no_final_linear from the model config.")


class ActorCriticModule(RLModule):
    """The default module of policy-gradient algorithms: a policy head and a value head.

    With `vf_share_layers=True` both heads sit on one MLP trunk; otherwise the policy and
    the value function are separate MLPs. For Box actions, `free_log_std=True` makes the
    log standard deviation a free parameter instead of a network output. The networks come
    from the spec's `catalog_class` (default: ActorCriticCatalog; see rlx.core.models.catalog).
    """

    #: The networks come from `self.catalog_class` (default: ActorCriticCatalog).
    builds_from_catalog = True

    def setup(self) -> None:
        cfg = self.model_config
        obs_space, action_space = self._spaces()
        # With an action mask in the (Dict) observation, the networks read only the other keys.
        self.action_mask = find_action_mask(obs_space, action_space, cfg)
        space = self.action_mask.input_space if self.action_mask is not None else obs_space
        catalog = (self.catalog_class or ActorCriticCatalog)(space, action_space, cfg)
        self.catalog = catalog
        self.free_log_std = catalog.free_log_std
        self.vf_share_layers = catalog.vf_share_layers
        if self.free_log_std:
            self.log_std = nn.Parameter(torch.full((catalog.pi_head_output_dim,), float(catalog.log_std_init)))
        # (A space without a shape, a Dict, is refused by the encoder built next.)
        self._flatten = not is_image_space(space, cfg) and space.shape is not None and len(space.shape) != 1
        self.encoder = catalog.build_actor_critic_encoder("torch")
        self.pi = catalog.build_pi_head("torch")
        self.vf: nn.Module | None = None if self.inference_only else catalog.build_vf_head("torch")

    def _obs(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The networks' input and the action mask (None without one)."""
        obs, mask = batch[Columns.OBS], None
        if self.action_mask is not None:
            obs, mask = self.action_mask.split(obs)
        if self._flatten:
            obs = obs.reshape(obs.shape[0], -1)
        return obs, mask

    def _pi(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        out = self.pi(features)
        if self.free_log_std:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return apply_action_mask(out, mask)

    @torch.no_grad()
    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The action-distribution inputs for acting (without gradients, as RLlib's modules act)."""
        obs, mask = self._obs(batch)
        features = self.encoder(obs) if self.encoder is not None else obs
        return {Columns.ACTION_DIST_INPUTS: self._pi(features, mask)}

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.forward_inference(batch, **kwargs)

    def numpy_inference_fn(self) -> Any:
        """forward_inference's action-distribution inputs in NumPy (see RLModule.numpy_inference_fn)
        for MLP networks without an action mask; None otherwise."""
        if self.action_mask is not None or not keeps_methods(
                self, ActorCriticModule, ("forward_inference", "forward_exploration", "_pi", "_obs")):
            return None
        pi = mlp_numpy_fn(self.pi)
        encoder = mlp_numpy_fn(self.encoder) if self.encoder is not None else None
        if pi is None or (self.encoder is not None and encoder is None):
            return None
        log_std = self.log_std.detach().numpy() if self.free_log_std else None

        def forward(obs: np.ndarray) -> np.ndarray:
            x = as_float32_rows(obs)
            out = pi(encoder(x) if encoder is not None else x)
            if log_std is not None:
                out = np.concatenate([out, np.broadcast_to(log_std, out.shape)], axis=-1)
            return out

        return forward

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, mask = self._obs(batch)
        if self.encoder is not None:
            features = self.encoder(obs)
            logits = self._pi(features, mask)
            values = built_layer(self, self.vf, "value head")(features).squeeze(-1)
        else:
            logits = self._pi(obs, mask)
            values = built_layer(self, self.vf, "value head")(obs).squeeze(-1)
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.VF_PREDS: values}

    def compute_values(self, batch: dict[str, Any]) -> torch.Tensor:
        """State values V(obs), shape [B]."""
        obs, _ = self._obs(batch)
        if self.encoder is not None:
            obs = self.encoder(obs)
        return built_layer(self, self.vf, "value head")(obs).squeeze(-1)
