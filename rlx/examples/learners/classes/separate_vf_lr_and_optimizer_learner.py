"""A PPO Learner with one optimizer for the policy and one for the value function (RLlib's
example class of the same name).

`configure_optimizers_for_module` registers "optim_for_pi" over the policy network with
`config.lr` and "optim_for_vf" over the value network with
`config.learner_config_dict["lr_vf"]` (default: `config.lr`). PPO's total loss is
unchanged: its value term has gradients only for the value network, its policy and entropy
terms only for the policy network, so each optimizer steps its own network with its own
learning rate. This needs a module whose policy and value function share no layers
(`DefaultModelConfig(vf_share_layers=False)`).
"""
from __future__ import annotations

from typing import Any

import torch

from rlx.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from rlx.utils.errors import ConfigError


def policy_and_value_parameters(module: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(policy parameters, value-function parameters) of an actor-critic module without shared
    layers: rlx's default module (`pi` and `vf` networks, `encoder` None) or one laid out as
    RLlib's (`encoder.actor_encoder` + `pi`, `encoder.critic_encoder` + `vf`)."""
    pi, vf = getattr(module, "pi", None), getattr(module, "vf", None)
    if pi is None or vf is None:
        raise TypeError(f"{type(module).__name__} has no separate 'pi' and 'vf' networks: a separate value-function "
                        "optimizer needs an actor-critic module.")
    encoder = getattr(module, "encoder", None)
    pi_params, vf_params = list(pi.parameters()), list(vf.parameters())
    if encoder is not None:
        actor, critic = getattr(encoder, "actor_encoder", None), getattr(encoder, "critic_encoder", None)
        if actor is None or critic is None:
            raise ConfigError("The policy and the value function share layers (vf_share_layers=True): two optimizers "
                              "would both step them. Set config.rl_module(model_config=DefaultModelConfig("
                              "vf_share_layers=False)).")
        pi_params = list(actor.parameters()) + pi_params
        vf_params = list(critic.parameters()) + vf_params
    shared = {id(p) for p in pi_params} & {id(p) for p in vf_params}
    if shared:
        raise ConfigError(f"{len(shared)} parameter tensors belong to both the policy and the value function; "
                          "use a module whose networks share nothing (vf_share_layers=False).")
    return pi_params, vf_params


class PPOTorchLearnerWithSeparateVfOptimizer(PPOTorchLearner):
    """PPO with the policy network stepped by one Adam optimizer (lr = `config.lr`) and the value
    network by another (lr = `config.learner_config_dict["lr_vf"]`)."""

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        config = self.config if config is None else config
        if config.model_config.get("vf_share_layers", False):
            raise ConfigError("PPOTorchLearnerWithSeparateVfOptimizer needs vf_share_layers=False: with shared "
                              "layers both optimizers would step them.")
        pi_params, vf_params = policy_and_value_parameters(self.module[module_id])
        self.register_optimizer(
            module_id=module_id,
            optimizer_name="optim_for_pi",
            optimizer=torch.optim.Adam(params=pi_params),
            params=pi_params,
            lr_or_lr_schedule=config.lr,
        )
        self.register_optimizer(
            module_id=module_id,
            optimizer_name="optim_for_vf",
            optimizer=torch.optim.Adam(params=vf_params),
            params=vf_params,
            lr_or_lr_schedule=config.learner_config_dict.get("lr_vf", config.lr),
        )
