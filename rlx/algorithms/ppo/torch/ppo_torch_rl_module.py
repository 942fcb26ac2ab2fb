"""PPOTorchRLModule (RLlib's `ray.rllib.algorithms.ppo.torch.ppo_torch_rl_module`): PPO's default
module, rlx's actor-critic module (rlx.core.models.ActorCriticModule), which builds its
networks with a PPOCatalog unless the spec names another catalog_class."""
from rlx.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule

PPOTorchRLModule = DefaultPPOTorchRLModule

__all__ = ["PPOTorchRLModule"]
