"""IntrinsicCuriosityModel: the Intrinsic Curiosity Module (Pathak et al. 2017) as an RLModule,
trained beside a policy to give curiosity (intrinsic) rewards (RLlib's curiosity example).

A feature net embeds obs and next obs (phi, next_phi); a forward net predicts next_phi from
phi and the action, and its squared error is the intrinsic reward of each transition; an
inverse net predicts the action from (phi, next_phi). `compute_self_supervised_loss` mixes
the forward loss (weight `learner_config_dict["forward_loss_weight"]`) with the inverse loss.
The module is only trained, never used to act.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from rlx.core.columns import Columns
from rlx.core.models.v2.misc import get_activation_fn
from rlx.core.rl_module.torch import TorchRLModule

#: The forward loss's weight when learner_config_dict has no "forward_loss_weight" (the paper's beta).
DEFAULT_FORWARD_LOSS_WEIGHT = 0.2


def _dense(in_size: int, hiddens: Sequence[int], activation: Any, out_size: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    act = get_activation_fn(activation) if activation not in (None, "linear") else None
    for size in hiddens:
        layers.append(nn.Linear(in_size, int(size)))
        if act is not None:
            layers.append(act())
        in_size = int(size)
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


class IntrinsicCuriosityModel(TorchRLModule):
    """Feature, forward and inverse nets over Box observations and Discrete actions.

    model_config keys (RLlib's): feature_dim (288), feature_net_hiddens ((256, 256)),
    feature_net_activation, inverse_net_hiddens ((256,)), inverse_net_activation,
    forward_net_hiddens ((256,)), forward_net_activation.
    """

    def setup(self) -> None:
        """Build the three nets from the model config."""
        observation_space, action_space = self._spaces()
        if not hasattr(action_space, "n"):
            raise ValueError(f"IntrinsicCuriosityModel takes a Discrete action space, got {action_space}.")
        cfg = self.model_config
        feature_dim = int(cfg.get("feature_dim", 288))
        self._num_actions = int(action_space.n)
        self._feature_net = _dense(int(observation_space.shape[0]), cfg.get("feature_net_hiddens", (256, 256)),
                                   cfg.get("feature_net_activation"), feature_dim)
        self._inverse_net = _dense(2 * feature_dim, cfg.get("inverse_net_hiddens", (256,)),
                                   cfg.get("inverse_net_activation"), self._num_actions)
        self._forward_net = _dense(feature_dim + self._num_actions, cfg.get("forward_net_hiddens", (256,)),
                                   cfg.get("forward_net_activation"), feature_dim)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = torch.as_tensor(batch[Columns.OBS], dtype=torch.float32)
        next_obs = torch.as_tensor(batch[Columns.NEXT_OBS], dtype=torch.float32)
        phi, next_phi = torch.chunk(self._feature_net(torch.cat([obs, next_obs], dim=0)), 2)
        actions = torch.as_tensor(batch[Columns.ACTIONS]).long().reshape(-1)
        one_hot = nn.functional.one_hot(actions, self._num_actions).to(phi.dtype)
        predicted_next_phi = self._forward_net(torch.cat([phi, one_hot], dim=-1))
        return {
            Columns.INTRINSIC_REWARDS: 0.5 * torch.sum((predicted_next_phi - next_phi) ** 2, dim=-1),
            "phi": phi,
            "next_phi": next_phi,
        }

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise TypeError("IntrinsicCuriosityModel is only trained (forward_train), never used to act: map no agent "
                        "to it and leave it out of the EnvRunners (learner_only=True in its RLModuleSpec).")

    def compute_self_supervised_loss(self, *, learner: Any = None, module_id: Any = None, config: Any = None,
                                     batch: dict[str, Any], fwd_out: dict[str, Any]) -> torch.Tensor:
        """w * mean forward loss + (1 - w) * mean inverse loss (-log p(action | phi, next_phi)),
        w = config.learner_config_dict["forward_loss_weight"]; logged to learner.metrics when given."""
        settings = getattr(config, "learner_config_dict", None) or {}
        weight = float(settings.get("forward_loss_weight", DEFAULT_FORWARD_LOSS_WEIGHT))
        forward_loss = torch.mean(fwd_out[Columns.INTRINSIC_REWARDS])
        logits = self._inverse_net(torch.cat([fwd_out["phi"], fwd_out["next_phi"]], dim=-1))
        actions = torch.as_tensor(batch[Columns.ACTIONS]).long().reshape(-1)
        inverse_loss = nn.functional.cross_entropy(logits, actions)
        metrics = getattr(learner, "metrics", None)
        if metrics is not None:
            metrics.log_dict({"mean_intrinsic_rewards": forward_loss.item(), "forward_loss": forward_loss.item(),
                              "inverse_loss": inverse_loss.item()}, key=module_id, window=1)
        return weight * forward_loss + (1.0 - weight) * inverse_loss
