"""PPOCatalog (RLlib's `ray.rllib.algorithms.ppo.ppo_catalog`): the catalog of PPO's default
module. Subclass it and override `build_pi_head`, `build_vf_head` or
`build_actor_critic_encoder`, then pass the subclass as `RLModuleSpec(catalog_class=...)`.
"""
from rlx.core.models.actor_critic_catalog import ActorCriticCatalog

__all__ = ["PPOCatalog"]


class PPOCatalog(ActorCriticCatalog):
    """The actor-critic catalog (see rlx.core.models.actor_critic_catalog) under PPO's name."""
